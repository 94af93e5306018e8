"""Schema migrations (forward-only, under an advisory lock) and partition maintenance."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigurationError, SchemaMismatch
from ..records import AgentApi
from .connection import search_path
from .queries import call, function_files, migration_files, query, sql_text

log = logging.getLogger("claimsched.migrations")

SCHEMA_VERSION = max(version for version, _, _ in migration_files())
MIGRATION_LOCK = 0x636C6D73  # 'clms': one advisory lock key for every claimsched migration
#: The version of the SQL API this release's agents call: sql/functions/'s cs_<name>_v2.
AGENT_API = 2

_PARTITION = sql.SQL("CREATE TABLE {} PARTITION OF job_runs FOR VALUES FROM ({}) TO ({})")
# Agents update rows in the default partition at any time: moving them must not interleave.
# Every statement locks job_runs before the partition it routes to, so maintenance locks in
# that order too (job_runs, which takes its partitions with it): locking the default partition
# first deadlocked with claims and receipts, and killed agents that were starting.
_LOCK_RUNS = sql.SQL("LOCK TABLE job_runs IN ACCESS EXCLUSIVE MODE")
_STASH = sql.SQL(
    "CREATE TEMP TABLE job_runs_moving ON COMMIT DROP AS "
    "SELECT * FROM job_runs_default WHERE fire_time >= {} AND fire_time < {}"
)
_UNSTASH_DELETE = sql.SQL("DELETE FROM job_runs_default WHERE fire_time >= {} AND fire_time < {}")
_UNSTASH = sql.SQL("INSERT INTO job_runs OVERRIDING SYSTEM VALUE SELECT * FROM job_runs_moving")
_STASH_DONE = sql.SQL("DROP TABLE job_runs_moving")
_DROP = sql.SQL("DROP TABLE {}")
_PURGE_DEFAULT = sql.SQL("DELETE FROM job_runs_default WHERE fire_time < {}")


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The applied schema version, or None when claimsched's tables are not there."""
    if not conn.execute(query("schema_exists")).fetchone()[0]:  # type: ignore[index]
        return None
    versions = [row[0] for row in conn.execute(query("schema_versions"))]
    return max(versions) if versions else None


def check_version(conn: psycopg.Connection[Any], agent_api: int | None = None,
                  schema: str | None = None) -> None:
    """Raise SchemaMismatch unless the schema is what this code expects: exactly its version;
    for an agent (`agent_api`: the version of the SQL API it calls), also a newer schema that
    still serves that API, as the next release's schema does while a rollout replaces agents.
    A schema without claimsched's tables is told which schemas of the database hold them."""
    found = schema_version(conn)
    if found == SCHEMA_VERSION:
        return
    if found is None:
        raise SchemaMismatch(_missing(conn, schema))
    if found < SCHEMA_VERSION:
        raise SchemaMismatch(
            f"the database schema is version {found}, this claimsched needs {SCHEMA_VERSION}: "
            "run `claimsched migrate`"
        )
    if agent_api is not None and serves_agent_api(conn, agent_api):
        log.info("the database schema is version %s, newer than this claimsched (%s); it "
                 "still serves the agent API v%s this agent calls", found, SCHEMA_VERSION,
                 agent_api, extra={"action": "schema_newer"})
        return
    still = f" and no longer serves the agent API v{agent_api}" if agent_api is not None else ""
    raise SchemaMismatch(
        f"the database schema is version {found}, newer than this claimsched "
        f"({SCHEMA_VERSION}){still}: upgrade claimsched"
    )


def serves_agent_api(conn: psycopg.Connection[Any], api: int) -> bool:
    """Whether the schema (version 17 or later) serves version `api` of the agent API."""
    row = conn.execute(query("serves_agent_api"), {"api": api}).fetchone()
    return bool(row and row[0])


def agent_apis(conn: psycopg.Connection[Any]) -> list[AgentApi]:
    """The versions of the agent API the schema serves, oldest first, each with the live agents
    that call it."""
    found: dict[int, AgentApi] = {}
    for api, release, agent_id, version in conn.execute(query("agent_api_callers")):
        known = found.setdefault(api, AgentApi(api, release, api == AGENT_API))
        if agent_id is not None:
            known.callers.append((agent_id, version))
    return list(found.values())


def check_schema_owned(conn: psycopg.Connection[Any], schema: str) -> None:
    """Raise ConfigurationError when a role other than the schema's owner may CREATE in it:
    such a role could put an object where claimsched's SECURITY DEFINER functions look."""
    others = [row[0] for row in conn.execute(query("schema_creators"), {"schema": schema})]
    if others:
        quoted = sql.Identifier(schema).as_string(conn)
        raise ConfigurationError(
            f"schema {schema}: {', '.join(others)} may CREATE in it, so claimsched's functions "
            f"could be made to run another role's objects; as its owner, run REVOKE CREATE ON "
            f"SCHEMA {quoted} FROM {', '.join(others)}; or give claimsched a schema of its own "
            "(--schema, CLAIMSCHED_SCHEMA)")


def _missing(conn: psycopg.Connection[Any], schema: str | None) -> str:
    """Why claimsched's tables are not where they are looked for, and what to do."""
    elsewhere = [row[0] for row in conn.execute(query("claimsched_schemas"))]
    where = f"schema {schema}" if schema else "this schema"
    if not elsewhere:
        return (f"claimsched's tables are missing ({where}, and no other schema of this "
                "database has them): run `claimsched migrate`")
    return (f"{where} has no claimsched tables; schema {', '.join(elsewhere)} of this "
            f"database has them: pass --schema {elsewhere[0]} (CLAIMSCHED_SCHEMA), or run "
            f"`claimsched migrate` with this --schema to create them here")


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[int]:
    """Bring the schema up to date; safe when many processes call it at once. Returns what ran."""
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        check_schema_owned(conn, schema)
        conn.execute("SELECT set_config('search_path', %s, true)", [search_path(conn, schema)])
        current = schema_version(conn)
        if current is not None and current > SCHEMA_VERSION:
            check_version(conn)
        served = served_agent_apis(conn)
        # One way to the current schema, fresh or not: the migrations, in order.
        for version, name, text in migration_files():
            if current is None or version > current:
                log.info("applying migration %s", name, extra={"action": "migrate"})
                conn.execute(text)
                conn.execute(query("record_version"), {"version": version})
                applied.append(version)
        apply_functions(conn, schema)
        refuse_dropping_called_apis(conn, served - served_agent_apis(conn))
        ensure_partitions(conn)
    return applied


def served_agent_apis(conn: psycopg.Connection[Any]) -> set[int]:
    """The versions of the agent API the schema lists as served (none before migration 0017)."""
    if not conn.execute(query("has_agent_apis")).fetchone()[0]:  # type: ignore[index]
        return set()
    return {api for (api,) in conn.execute(query("served_agent_apis"))}


def refuse_dropping_called_apis(conn: psycopg.Connection[Any], dropped: set[int]) -> None:
    """Raise SchemaMismatch (the migration's transaction then changes nothing) when a live
    agent still calls a version of the agent API that a migration dropped: it would fail at
    its next statement."""
    for api in sorted(dropped):
        callers = conn.execute(call("cs_api_callers"), {"api": api}).fetchall()
        if callers:
            raise SchemaMismatch(
                f"this migrate would drop version {api} of the agent API, which live agents "
                f"still call: {', '.join(f'{agent} ({release})' for agent, release in callers)};"
                " replace them with agents of a newer release (or wait until they are gone), "
                "then migrate again; nothing was changed")


def apply_functions(conn: psycopg.Connection[Any], schema: str) -> None:
    """(Re)create the functions agents and the operator write through (sql/functions/), then
    the row-level security that scopes readers (sql/policies.sql): code, not schema, so every
    migrate applies the current ones. They run with claimsched's schema first in the search_path,
    so that CREATE puts each function there (sql/functions/_paths.sql then gives each the path
    it keeps: pg_catalog first); the session's own is set back after."""
    conn.execute("SELECT set_config('search_path', %s, true)", [function_path(conn, schema)])
    for _, text in function_files():
        conn.execute(text)
    conn.execute(sql_text("policies.sql"))
    conn.execute("SELECT set_config('search_path', %s, true)", [search_path(conn, schema)])


def function_path(conn: psycopg.Connection[Any], schema: str) -> str:
    """The search_path the function files run with: claimsched's schema first (where CREATE
    puts an unqualified function), pg_temp last."""
    return sql.SQL("{}, pg_catalog, pg_temp").format(sql.Identifier(schema)).as_string(conn)


def _month_start(moment: datetime, months_ahead: int = 0) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months_ahead
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def _partition_name(start: datetime) -> str:
    return f"job_runs_p{start:%Y%m}"


def _existing_partitions(conn: psycopg.Connection[Any]) -> set[str]:
    return {row[0] for row in conn.execute(query("partitions"))}


def ensure_partitions(conn: psycopg.Connection[Any], months_ahead: int = 3) -> list[str]:
    """Create monthly partitions from this month to `months_ahead`; move strays out of default."""
    now = conn.execute(query("db_now")).fetchone()[0]  # type: ignore[index]
    existing = _existing_partitions(conn)
    created = []
    for ahead in range(months_ahead + 1):
        start, end = _month_start(now, ahead), _month_start(now, ahead + 1)
        name = _partition_name(start)
        if name in existing:
            continue
        with conn.transaction():
            lo, hi = sql.Literal(start), sql.Literal(end)
            conn.execute(_LOCK_RUNS)
            conn.execute(_STASH.format(lo, hi))
            conn.execute(_UNSTASH_DELETE.format(lo, hi))
            conn.execute(_PARTITION.format(sql.Identifier(name), lo, hi))
            conn.execute(_UNSTASH)
            conn.execute(_STASH_DONE)
        created.append(name)
    return created


@dataclass(frozen=True)
class Maintenance:
    """What a maintenance pass did: the partitions of job_runs it created ahead and dropped past
    the retention period, and how many rows it purged or expired."""

    partitions_created: list[str]
    partitions_dropped: list[str]
    default_rows_purged: int
    effects_expired: int
    attempts_expired: int
    agents_forgotten: int


def maintain(
    conn: psycopg.Connection[Any], schema: str, retention_days: int = 90
) -> Maintenance:
    """Partitions ahead, history older than the retention period dropped, stale presence gone."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
        # here too: behind a pooler the connection's own search_path does not last
        conn.execute(query("set_local_search_path"), {"search_path": search_path(conn, schema)})
        return _maintain(conn, retention_days)


def _maintain(conn: psycopg.Connection[Any], retention_days: int) -> Maintenance:
    created = ensure_partitions(conn)
    now = conn.execute(query("db_now")).fetchone()[0]  # type: ignore[index]
    horizon = now - timedelta(days=retention_days)
    dropped = []
    for name in sorted(_existing_partitions(conn)):
        if not name.startswith("job_runs_p"):
            continue
        start = datetime.strptime(name.removeprefix("job_runs_p"), "%Y%m").replace(tzinfo=UTC)
        if _month_start(start, 1) <= horizon:
            conn.execute(_DROP.format(sql.Identifier(name)))
            dropped.append(name)
    purged = conn.execute(_PURGE_DEFAULT.format(sql.Literal(horizon))).rowcount
    if dropped or purged:
        conn.execute(query("history_changed"))
    effects = conn.execute(query("expire_effects"), {"days": retention_days}).rowcount
    attempts = conn.execute(query("expire_attempts"), {"days": retention_days}).rowcount
    agents = conn.execute(query("forget_agents")).rowcount
    return Maintenance(
        partitions_created=created,
        partitions_dropped=dropped,
        default_rows_purged=purged,
        effects_expired=effects,
        attempts_expired=attempts,
        agents_forgotten=agents,
    )
