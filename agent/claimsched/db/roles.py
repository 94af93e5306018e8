"""The agent's and the operator's database roles (sql/roles.sql): created if missing, their
privileges set to exactly what each one needs, in one transaction. Never a password."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
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
    """The names of the two roles, and the agent role's scope: the jobs it may act for, by
    exact name (`jobs`) and by LIKE pattern (`jobs_like`: '%' any characters, '_' any one, '\'
    escapes). Both None: leave its scope as it is; both empty: every job. `team`: a third role,
    for a team's people and tools (the CLI, the web view): the operator role's rights, with the
    agent role's scope."""

    agent: str = AGENT_ROLE
    operator: str = OPERATOR_ROLE
    jobs: tuple[str, ...] | None = None
    jobs_like: tuple[str, ...] | None = None
    team: str | None = None

    def __post_init__(self) -> None:
        names = [self.agent, self.operator, *([self.team] if self.team else [])]
        for name in names:
            if not _ROLE_NAME.match(name):
                raise ConfigurationError(
                    f"role name {name!r}: letters, digits and '_', at most 63, not a digit first")
        if len(set(names)) < len(names):
            raise ConfigurationError("the agent, the operator and the team need different roles")
        if not all(job.strip() for job in (*(self.jobs or ()), *(self.jobs_like or ()))):
            raise ConfigurationError("a job name or pattern may not be empty")
        if self.team and not self.patterns:
            raise ConfigurationError("a team role needs the jobs of its scope (--jobs, "
                                     "--jobs-like)")

    @property
    def patterns(self) -> list[str] | None:
        """The scope as agent_scopes holds it: LIKE patterns, an exact name escaped into one
        that matches it alone. None: leave the scope as it is; []: every job."""
        if self.jobs is None and self.jobs_like is None:
            return None
        return sorted({*map(exact_pattern, self.jobs or ()), *(self.jobs_like or ())})


def exact_pattern(name: str) -> str:
    """The LIKE pattern that matches `name` and nothing else ('_' and '%' are literal)."""
    return name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


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
        migrations.check_version(conn, schema=schema)
        migrations.check_schema_owned(conn, schema)
        database = conn.execute(query("current_database")).fetchone()[0]  # type: ignore[index]
        conn.execute(roles_sql(roles, schema, database))
        patterns = roles.patterns
        if patterns is not None:
            conn.execute(query("replace_agent_scope"), {"role": roles.agent, "patterns": patterns})
        if roles.team:  # the operator's rights, scoped as the agent role is
            conn.execute(roles_sql(replace(roles, operator=roles.team, team=None), schema,
                                   database))
            conn.execute(query("replace_agent_scope"), {"role": roles.team, "patterns": patterns})


def scoped_jobs(conn: psycopg.Connection[Any], schema: str, role: str) -> list[str] | None:
    """The jobs with a schedule that `role`'s own scope lets it act for today, sorted; None when
    it has no scope (every job)."""
    with conn.transaction():
        conn.execute(query("set_local_search_path"), {"search_path": search_path(conn, schema)})
        rows = conn.execute(query("scoped_jobs"), {"role": role}).fetchall()
    return None if not rows else sorted(name for (name,) in rows if name is not None)
