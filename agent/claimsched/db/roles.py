"""The agent's and the operator's database roles (sql/roles.sql): created if missing, their
privileges set to exactly what each one needs, in one transaction. Never a password."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigurationError
from . import migrations
from .connection import search_path
from .queries import query, sql_text

AGENT_ROLE = "claimsched_agent"
OPERATOR_ROLE = "claimsched_operator"
_ROLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Roles:
    """The names of the two roles, and the agent role's scope: the LIKE patterns of the jobs it
    may act for (`jobs`; an empty tuple: every job; None: leave its scope as it is)."""

    agent: str = AGENT_ROLE
    operator: str = OPERATOR_ROLE
    jobs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in (self.agent, self.operator):
            if not _ROLE_NAME.match(name):
                raise ConfigurationError(
                    f"role name {name!r}: letters, digits and '_', at most 63, not a digit first")
        if self.agent == self.operator:
            raise ConfigurationError("the agent and the operator need two different roles")
        if self.jobs is not None and not all(pattern.strip() for pattern in self.jobs):
            raise ConfigurationError("a job pattern may not be empty")


def roles_sql(roles: Roles, schema: str, database: str) -> sql.Composed:
    """sql/roles.sql with the roles, the schema and the database filled in."""
    return sql.SQL(sql_text("roles.sql")).format(
        agent=sql.Identifier(roles.agent),
        operator=sql.Identifier(roles.operator),
        agent_name=sql.Literal(roles.agent),
        operator_name=sql.Literal(roles.operator),
        schema=sql.Identifier(schema),
        database=sql.Identifier(database),
    )


def grant_roles(conn: psycopg.Connection[Any], schema: str, roles: Roles) -> None:
    """Create the roles if missing and set their privileges on `schema` (already migrated)."""
    with conn.transaction():
        conn.execute(query("set_local_search_path"), {"search_path": search_path(conn, schema)})
        migrations.check_version(conn)
        database = conn.execute(query("current_database")).fetchone()[0]  # type: ignore[index]
        conn.execute(roles_sql(roles, schema, database))
        if roles.jobs is not None:
            conn.execute(query("replace_agent_scope"),
                         {"role": roles.agent, "patterns": sorted(set(roles.jobs))})
