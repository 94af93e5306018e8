"""The schema's keeping: migrate it, check its version and the agent APIs it serves, grant the
roles, maintain partitions and retention, say which database this is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ..conflicts import retry_conflicts
from ..records import AgentApi, DatabaseIdentity
from . import migrations
from .connection import Connect, translated
from .identity import IdentityWatch, read_identity
from .roles import Roles, grant_roles, scoped_jobs


class Admin:
    """Statements about the schema itself. Migrations and maintenance run on a connection of
    their own (`unhurried`): they wait for locks and may take long, by design."""

    def __init__(self, connect: Connect, unhurried: Callable[[], psycopg.Connection[Any]],
                 schema: str, identity: IdentityWatch) -> None:
        self._connect = connect
        self._unhurried = unhurried
        self._schema = schema
        self._identity = identity

    def migrate(self) -> list[int]:
        """Apply the migrations this schema lacks; the versions applied."""
        return retry_conflicts(self._migrate)

    def _migrate(self) -> list[int]:
        with translated(), self._unhurried() as conn:
            return migrations.migrate(conn, self._schema)

    def grant_roles(self, roles: Roles) -> None:
        """Create or update the agent's and the operator's roles (db/roles.py)."""
        with translated(), self._unhurried() as conn:
            grant_roles(conn, self._schema, roles)

    def scoped_jobs(self, role: str) -> list[str] | None:
        """The jobs `role`'s scope lets it act for today (None: every job; db/roles.py)."""
        with translated(), self._unhurried() as conn:
            return scoped_jobs(conn, self._schema, role)

    def check_version(self, agent_api: int | None = None) -> None:
        """SchemaMismatch unless the schema is this release's, or, for an agent calling version
        `agent_api` of the SQL API, a newer one that still serves it (db/migrations.py)."""
        with self._connect() as conn:
            migrations.check_version(conn, agent_api, self._schema)

    def served_agent_apis(self) -> set[int]:
        """The versions of the agent API the schema serves (none before migration 0017)."""
        with translated(), self._connect() as conn:
            return migrations.served_agent_apis(conn)

    def agent_apis(self) -> list[AgentApi]:
        """The versions of the agent API the schema serves, with the live agents calling each."""
        with translated(), self._connect() as conn:
            return migrations.agent_apis(conn)

    def schema_version(self) -> int | None:
        """The applied schema version, or None when claimsched's tables are not there."""
        with self._connect() as conn:
            return migrations.schema_version(conn)

    def maintain(self, retention_days: int = 90) -> migrations.Maintenance:
        """Partitions ahead, history older than `retention_days` dropped, stale presence gone;
        what was done (db/migrations.py)."""
        return retry_conflicts(lambda: self._maintain(retention_days))

    def _maintain(self, retention_days: int) -> migrations.Maintenance:
        with translated(), self._unhurried() as conn:
            return migrations.maintain(conn, self._schema, retention_days)

    def database_identity(self) -> DatabaseIdentity | None:
        """Which database this is and how durable its commits are (None before migrating)."""
        with self._connect() as conn:
            found = read_identity(conn)
        self._identity.observe(found)
        return found
