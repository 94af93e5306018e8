"""A throwaway Postgres with pg_stat_statements, a database for the agents and one for pgbench,
and the per-role statement statistics the benchmarks count. The server is one standalone
Postgres, or (`cluster(sync=True)`) the leader of a Patroni cluster whose other node is its
synchronous standby: every commit that asks for it waits for the standby's flush."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import psycopg

from claimsched.db import Store
from claimsched.db.queries import call, function_files, parameters, queries, query
from claimsched.tools.postgres import TemporaryPostgres

from . import sql
from .ha.patroni import PatroniCluster, patroni_cluster

SETTINGS = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_utility": "on",
    "pg_stat_statements.max": "10000",
    "pg_stat_statements.track_planning": "on",
    "max_connections": "400",
}


class Server(Protocol):
    """What the benchmarks read of a server: DSNs, its log and its data directory."""

    @property
    def dsn(self) -> str: ...

    def dsn_for(self, database: str, user: str = "postgres") -> str: ...

    @property
    def log(self) -> Path: ...

    @property
    def data(self) -> Path: ...


@dataclass
class SyncLeader:
    """The leader of a Patroni cluster with a synchronous standby, read as a Server; DSNs name
    both nodes (read-write only)."""

    ha: PatroniCluster

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str, user: str = "postgres") -> str:
        return self.ha.dsn(database, user)

    @property
    def data(self) -> Path:
        leader = self.ha.leader()
        assert leader is not None, self.ha.logs()
        return self.ha.members[leader].data

    @property
    def log(self) -> Path:
        return self.data / "log" / "postgresql.log"  # logging_collector, see SYNC_SETTINGS


@dataclass
class Cluster:
    """The server, and DSNs for the agents, the operator and the harness (superuser)."""

    pg: Server
    admin: psycopg.Connection[Any] = field(init=False)

    @property
    def agent_dsn(self) -> str:
        return self.pg.dsn_for(sql.DATABASE, sql.AGENT_ROLE)

    @property
    def operator_dsn(self) -> str:
        return self.pg.dsn_for(sql.DATABASE, sql.OPERATOR_ROLE)

    @property
    def admin_dsn(self) -> str:
        return self.pg.dsn_for(sql.DATABASE)

    def pgbench_dsn(self, user: str = "postgres") -> str:
        return self.pg.dsn_for(sql.PGBENCH_DATABASE, user)

    def setup(self) -> None:
        with psycopg.connect(self.pg.dsn, autocommit=True) as conn:
            for statement in sql.SETUP_SERVER:
                conn.execute(statement)
        for database in (sql.DATABASE, sql.PGBENCH_DATABASE):
            dsn = self.pg.dsn_for(database, sql.AGENT_ROLE)
            store = Store(dsn, max_size=1, name="bench-migrate")
            try:
                store.admin.migrate()
            finally:
                store.close()
        self.admin = psycopg.connect(self.admin_dsn, autocommit=True)
        self.admin.execute(sql.SETUP_DATABASE)

    def execute(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        cur = self.admin.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []

    def server_version(self) -> str:
        return str(self.execute(sql.SERVER_VERSION)[0][0])

    def standbys(self) -> list[dict[str, Any]]:
        """The server's standbys as pg_stat_replication shows them (none when standalone)."""
        rows = self.execute(sql.STANDBYS)
        return [{"name": r[0], "state": r[1], "sync_state": r[2]} for r in rows]

    def statements(self, role: str = sql.AGENT_ROLE) -> Snapshot:
        rows = self.execute(sql.STATEMENT_STATS, {"role": role, "database": sql.DATABASE})
        return Snapshot({(r[0], r[1]): (r[2], r[3], r[4], r[5], r[6]) for r in rows})

    def server_errors(self) -> dict[str, int]:
        """ERROR lines of the server log, by message (deadlocks, lock timeouts, ...)."""
        try:
            text = self.pg.log.read_text(errors="replace")
        except OSError:
            return {}
        found: dict[str, int] = {}
        for line in text.splitlines():
            if "ERROR:" in line:
                message = re.sub(r"\d+", "N", line.split("ERROR:", 1)[1].strip())[:120]
                found[message] = found.get(message, 0) + 1
        return found

    def postmaster_pid(self) -> int:
        return int((self.pg.data / "postmaster.pid").read_text().split()[0])

    def db_cpu_seconds(self) -> float:
        """CPU (user + system) of the postmaster and all its children: the server's cost."""
        parent = self.postmaster_pid()
        total = cpu_seconds(parent) or 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        return total


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process from /proc/<pid>/stat, in seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float | None:
    """VmRSS of a process from /proc/<pid>/status, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# The standalone server's own defaults (claimsched.tools.postgres) that Patroni does not set, so
# that the two differ by the standby only (the agents' claims, completions and receipts ask for
# synchronous_commit = on whatever the default); and its log in a file.
SYNC_SETTINGS = {
    **{key: value.strip("'") for key, value in SETTINGS.items()},
    "synchronous_commit": "off",
    "logging_collector": "on",
    "log_directory": "log",
    "log_filename": "postgresql.log",
}


@contextmanager
def cluster(sync: bool = False) -> Iterator[Cluster]:
    """One standalone server, or with `sync` a Patroni cluster (synchronous, strict)."""
    if sync:
        with patroni_cluster(parameters=SYNC_SETTINGS) as ha:
            yield from _set_up(SyncLeader(ha))
        return
    pg = TemporaryPostgres(settings=SETTINGS)
    pg.start()
    try:
        yield from _set_up(pg)
    finally:
        pg.destroy()


def _set_up(server: Server) -> Iterator[Cluster]:
    found = Cluster(server)
    found.setup()
    try:
        yield found
    finally:
        found.admin.close()


# -- statement statistics ------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """pg_stat_statements rows of one role:
    (queryid, toplevel) -> (calls, execution ms, rows, text, planning ms)."""

    rows: dict[tuple[int, bool], tuple[int, float, int, str, float]]

    def since(self, before: Snapshot) -> dict[str, dict[str, float]]:
        """Statements sent (top level only) between two snapshots, grouped by kind."""
        kinds: dict[str, dict[str, float]] = {}
        for key, (calls, ms, rows, text, plan_ms) in self.rows.items():
            old = before.rows.get(key, (0, 0.0, 0, text, 0.0))
            if not key[1] or calls - old[0] <= 0:
                continue
            entry = kinds.setdefault(
                kind_of(text), {"calls": 0, "total_ms": 0.0, "rows": 0, "plan_ms": 0.0}
            )
            entry["calls"] += calls - old[0]
            entry["total_ms"] += ms - old[1]
            entry["rows"] += rows - old[2]
            entry["plan_ms"] += plan_ms - old[4]
        return dict(sorted(kinds.items(), key=lambda item: -item[1]["calls"]))


_LITERALS = re.compile(
    r"'(?:[^']|'')*'|\$\d+|%\(\w+\)s|%s|\b\d+(?:\.\d+)?\b|\b(?:true|false|null)\b",
    re.IGNORECASE,
)


def _shape(text: str) -> str:
    """A statement without its constants, parameters and spacing: equal for the text psycopg
    sent and the normalized text pg_stat_statements keeps."""
    return re.sub(r"\s+", "", _LITERALS.sub("", text.replace("%%", "%"))).lower()


@cache
def _named_shapes() -> dict[str, str]:
    rendered = {name: query(name) for name in queries()}
    shapes = {_shape(body if isinstance(body, str) else body.as_string(None)): name
              for name, body in rendered.items()}
    # a call of an agent API function, by what it does: cs_claim_v2 (and cs_claim) is "claim"
    return shapes | {_shape(call(function)): re.sub(r"^cs_|_v\d+$", "", function)
                     for function in _api_functions()}


def _api_functions() -> list[str]:
    """The functions of sql/functions/ that agents, the CLI and the operator call by name."""
    names = [file.removesuffix(".sql") for file, _ in function_files()]
    return [name for name in names if name.startswith("cs_") and _callable(name)]


def _callable(function: str) -> bool:
    try:
        parameters(function)
    except ValueError:
        return False
    return True


def kind_of(text: str) -> str:
    """The named query (sql/queries.sql, sql/operator.sql) or the function call a statement is,
    or what it is."""
    shape = _shape(text)
    named = _named_shapes().get(shape)
    if named:
        return named
    words = text.split()
    first = words[0].upper() if words else ""
    if first in {"BEGIN", "COMMIT", "ROLLBACK", "LISTEN", "UNLISTEN", "SET", "SHOW"}:
        return first
    if shape.startswith("selectset_config("):
        return "set_config (session settings of a new pool connection)"
    return "other: " + " ".join(words)[:60]
