"""The store: every statement the agent, CLI and operator send, behind typed methods."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from ..conflicts import retry_conflicts
from ..errors import InvalidSpec, UnknownJob
from ..records import (
    AgentApi,
    Candidate,
    ClaimResult,
    Completion,
    DatabaseIdentity,
    Housekeeping,
    Lease,
    Queued,
    QueuedRun,
    Written,
)
from ..schedule.specs import JobSpec, ScheduleRecord
from . import migrations
from .arrays import LEASE_KEYS, arrays, claim_params, literal
from .connection import checked_schema, configure, connect, make_pool, redact_dsn, translated
from .identity import IdentityWatch, read_identity
from .listener import Listener, Poller
from .queries import query
from .receipts import Receipts
from .roles import Roles, grant_roles, scoped_jobs
from .session import Pooling, SessionOptions, detect_pooling, pooling_note

log = logging.getLogger("claimsched.store")


R = TypeVar("R")
SCHEDULE_BATCH = 1000  # rows per fetch of a full schedule read (each_schedule)


def _record(kind: type[R], row: dict[str, Any]) -> R:
    """The record dataclass `kind` from a row holding its fields (a field with a default may
    be missing)."""
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    return kind(**{name: row[name] for name in names if name in row})


def _leases(cur: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], Lease]:
    """Makes a Lease from a row of `cur`'s result (tuple rows, columns found by name once: a
    dict per row and a dataclass round trip per lease were a cost of their own)."""
    at = {column.name: i for i, column in enumerate(cur.description or ())}
    fields = [(f.name, at[f.name]) for f in dataclasses.fields(Lease) if f.name in at]

    def lease(row: Sequence[Any]) -> Lease:
        found = {name: row[i] for name, i in fields}
        # integer (or numeric) columns: a lease's seconds are floats to the agent
        found["lease_seconds"] = float(found["lease_seconds"])
        found["heartbeat_seconds"] = float(found["heartbeat_seconds"])
        return Lease(**found)

    return lease


def read_unclaimed(conn: psycopg.Connection[Any], candidates: Sequence[Candidate]
                   ) -> set[tuple[str, datetime]]:
    """Store.unclaimed on `conn`. Planned anew at each call (a plan is ~0.1 ms): a plain
    read can't set enable_seqscan as our functions do, and a plan kept from when the runs'
    partition was small would scan it for every key ever after (test_run_plans)."""
    params = arrays(candidates, jobs="job_name", fire_times="fire_time")
    rows = conn.execute(query("unclaimed"), params, prepare=False)
    return {(job, fire) for job, fire in rows}


def spec_json(spec: JobSpec) -> Jsonb:
    """A schedule's row as the jsonb the functions that write one take (sql/functions/)."""
    return Jsonb(spec.row(), dumps=lambda row: json.dumps(row, default=datetime.isoformat))


class Store:
    """A pool of connections to one claimsched schema, and the statements claimsched sends."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "claimsched",
        pool: psycopg_pool.ConnectionPool[Any] | None = None,
        max_size: int = 8,
        name: str = "claimsched",
        options: SessionOptions | None = None,
        listen_dsn: str | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        if pool is None and not dsn:
            raise ValueError("a Store needs a dsn or a pool")
        self.schema = checked_schema(schema)
        self.dsn: str = dsn or str(pool.conninfo)  # type: ignore[union-attr]
        self.options = options or SessionOptions()
        self.listen_dsn = listen_dsn
        self.poll_seconds = poll_seconds
        self.pooling: Pooling = "direct"
        self.identity = IdentityWatch()
        self._own_pool = pool is None
        self._pool_size, self._pool_name = max_size, name
        self.pool = pool or self._new_pool()
        self._opened = not self._own_pool
        self._give_up_at: float | None = None
        self.receipts = Receipts(self.connection, schema)

    def __repr__(self) -> str:
        return f"Store({redact_dsn(self.dsn)!r}, schema={self.schema!r})"

    def _new_pool(self) -> psycopg_pool.ConnectionPool[Any]:
        return make_pool(self.dsn, self.options, self._configure, self._pool_size,
                         self._pool_name)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, timeout: float = 10.0) -> None:
        """Open the pool and wait for a first connection, or raise a clear error."""
        with translated():
            if self._own_pool:
                # A direct first connection says precisely what is wrong (the pool would not),
                # and whether a pooler stands between us and the database.
                with connect(
                    self.dsn, self.schema, self.options, timeout=timeout, configured=False
                ) as first:
                    self.pooling = detect_pooling(first, redact_dsn(self.dsn))
                log.info(
                    "%s",
                    pooling_note(self.pooling, bool(self.listen_dsn), self.poll_seconds),
                    extra={"action": "connect"},
                )
                try:
                    self.pool.open(wait=True, timeout=timeout)
                except BaseException:
                    # psycopg_pool closes a pool whose first fill timed out, for good: the next
                    # open() (a retry while the database is away) needs a new one.
                    self.pool.close(timeout=0)
                    self.pool = self._new_pool()
                    raise
                self._opened = True
            with self.pool.connection(timeout=timeout) as conn:
                conn.execute(query("db_now"))

    def close(self) -> None:
        if self._own_pool:
            self.pool.close(timeout=self._remaining(5.0))

    def give_up_at(self, deadline: float) -> None:
        """From now on no wait for a connection lasts past `deadline` (time.monotonic()):
        a stopping agent must not hang on a database that is away."""
        self._give_up_at = deadline

    def _remaining(self, timeout: float) -> float:
        if self._give_up_at is None:
            return timeout
        return max(0.1, min(timeout, self._give_up_at - time.monotonic()))

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Every new pooled connection: its settings (unless a pooler would not keep them),
        and which database it reached (a failover shows here first)."""
        conn.autocommit = True
        if self.pooling == "direct":
            configure(conn, self.schema, self.options)
            self.identity.observe(read_identity(conn))
            return
        conn.prepare_threshold = None  # a pooler shares server sessions: nothing prepared
        with conn.transaction():
            self._settings_for_this_transaction(conn)
            self.identity.observe(read_identity(conn))

    def _settings_for_this_transaction(self, conn: psycopg.Connection[Any]) -> None:
        configure(conn, self.schema, self.options, local=True)

    @contextmanager
    def connection(self, timeout: float = 10.0) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection with claimsched's settings; errors translated.

        Behind a pooler the settings hold for one transaction only: the block then runs in one
        transaction that sets them first (a `conn.transaction()` inside it is a savepoint).
        That costs BEGIN and COMMIT round trips; a pipeline would save them, but psycopg ends
        its implicit transaction at a nested transaction() and has no rowcount before sync."""
        timeout = self._remaining(timeout)
        if not self._opened:
            self.open(timeout)
        with translated(), self.pool.connection(timeout=timeout) as conn:
            if self.pooling == "direct":
                yield conn
            else:
                with conn.transaction():
                    self._settings_for_this_transaction(conn)
                    yield conn

    def direct(self, options: SessionOptions | None = None) -> psycopg.Connection[Any]:
        """A fresh connection outside the pool (migrations, maintenance, listening)."""
        configured = self.pooling == "direct"
        return connect(self.dsn, self.schema, options or self.options, configured=configured)

    def _unhurried(self) -> psycopg.Connection[Any]:
        """For migrations and maintenance: they wait for locks and may take long, by design."""
        return self.direct(dataclasses.replace(self.options, statement_timeout=0, lock_timeout=0))

    def migrate(self) -> list[int]:
        return retry_conflicts(self._migrate)

    def _migrate(self) -> list[int]:
        with translated(), self._unhurried() as conn:
            return migrations.migrate(conn, self.schema)

    def grant_roles(self, roles: Roles) -> None:
        """Create or update the agent's and the operator's roles (db/roles.py)."""
        with translated(), self._unhurried() as conn:
            grant_roles(conn, self.schema, roles)

    def scoped_jobs(self, role: str) -> list[str] | None:
        """The jobs `role`'s scope lets it act for today (None: every job; db/roles.py)."""
        with translated(), self._unhurried() as conn:
            return scoped_jobs(conn, self.schema, role)

    def check_version(self, agent_api: int | None = None) -> None:
        """SchemaMismatch unless the schema is this release's, or, for an agent calling version
        `agent_api` of the SQL API, a newer one that still serves it (db/migrations.py)."""
        with self.connection() as conn:
            migrations.check_version(conn, agent_api, self.schema)

    def served_agent_apis(self) -> set[int]:
        """The versions of the agent API the schema serves (none before migration 0017)."""
        with translated(), self.connection() as conn:
            return migrations.served_agent_apis(conn)

    def agent_apis(self) -> list[AgentApi]:
        """The versions of the agent API the schema serves, with the live agents calling each."""
        with translated(), self.connection() as conn:
            return migrations.agent_apis(conn)

    def schema_version(self) -> int | None:
        with self.connection() as conn:
            return migrations.schema_version(conn)

    def maintain(self, retention_days: int = 90) -> dict[str, Any]:
        return retry_conflicts(lambda: self._maintain(retention_days))

    def _maintain(self, retention_days: int) -> dict[str, Any]:
        with translated(), self._unhurried() as conn:
            return migrations.maintain(conn, self.schema, retention_days)

    def database_identity(self) -> DatabaseIdentity | None:
        """Which database this is and how durable its commits are (None before migrating)."""
        with self.connection() as conn:
            found = read_identity(conn)
        self.identity.observe(found)
        return found

    def db_now(self) -> datetime:
        with self.connection() as conn:
            return conn.execute(query("db_now")).fetchone()[0]  # type: ignore[index,no-any-return]

    # -- schedules ---------------------------------------------------------------------------

    def load_schedules(self, names: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule, or those of `names` (a name without a row has none)."""
        return list(self.each_schedule(names))

    def each_schedule(self, names: Collection[str] | None = None) -> Iterator[ScheduleRecord]:
        """load_schedules one row at a time: every schedule comes from a server-side cursor,
        so that a reader that keeps less than the rows (the agent) never holds all of them."""
        if names is None:
            yield from (ScheduleRecord(**row) for row in self._stream("load_schedules", dict_row))
            return
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query("load_schedules_named"), {"names": list(names)})
            yield from (ScheduleRecord(**row) for row in rows)

    def each_schedule_version(self) -> Iterator[tuple[str, datetime]]:
        """Each schedule's last change (its updated_at), by job, one at a time."""
        yield from self._stream("schedule_versions", tuple_row)

    def _stream(self, name: str, rows: Any) -> Iterator[Any]:
        """The rows of a named query, SCHEDULE_BATCH at a time from a server-side cursor."""
        with self.connection() as conn, conn.transaction(), conn.cursor(
                f"claimsched_{name}", row_factory=rows) as cursor:
            cursor.itersize = SCHEDULE_BATCH
            yield from cursor.execute(query(name))

    def upsert_schedule(self, spec: JobSpec) -> Written:
        """Write a code declaration's or the CLI's schedule, unless another owner holds the job
        (then `held_by` names it; see claimsched.ownership)."""
        statement = "declare_schedule" if spec.source == "code" else "upsert_schedule"
        with self.connection() as conn:
            row = conn.execute(query(statement), {"spec": spec_json(spec)}).fetchone()
        assert row is not None
        return Written.from_row(row, spec.source, spec.owner)

    def suspend_schedule(self, job_name: str, until: datetime | None,
                         reason: str | None) -> dict[str, Any]:
        """Suspend a job until `until` (it resumes by itself) or until resumed; the row as it
        is now. UnknownJob when there is none; InvalidSpec when a ClaimSchedule owns it."""
        return self._suspension("suspend_schedule",
                                {"job_name": job_name, "until": until, "reason": reason})

    def resume_schedule(self, job_name: str) -> dict[str, Any]:
        """Resume a job from now on (nothing that fell while suspended runs); the row now."""
        return self._suspension("resume_schedule", {"job_name": job_name})

    def _suspension(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        job = params["job_name"]
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query(name), params).fetchone()
            if row is not None:
                return row
            owner = cur.execute(query("schedule_owner"), {"job_name": job}).fetchone()
        if owner is None:
            raise UnknownJob(f"no schedule for job {job!r}")
        raise InvalidSpec(f"job {job!r} belongs to ClaimSchedule {owner['owner']}: set "
                          "spec.suspend (and suspendUntil, suspendReason) there")

    def disable_schedule(self, job_name: str) -> bool:
        with self.connection() as conn:
            return conn.execute(query("disable_schedule"), {"job_name": job_name}).rowcount > 0

    # -- claims and leases -------------------------------------------------------------------

    def claim(
        self,
        agent_id: str,
        candidates: Sequence[Candidate],
        capacity: int,
        proceed: Callable[[], bool] = lambda: True,
    ) -> tuple[datetime, list[ClaimResult]] | None:
        """One statement: claim what is due and fits; returns the database clock and outcomes.

        None when `proceed()` said no once a connection was at hand (the agent began to stop
        while it waited for the database): nothing was claimed."""
        params = claim_params(agent_id, candidates, capacity)
        with self.connection() as conn, conn.cursor() as cur:
            if not proceed():
                return None
            rows = cur.execute(query("claim"), params).fetchall()
            lease = _leases(cur)
            at = {column.name: i for i, column in enumerate(cur.description or ())}
        job, fire, outcome = at["job_name"], at["fire_time"], at["outcome"]
        results = [
            ClaimResult(row[job], row[fire], row[outcome],
                        lease(row) if row[outcome] == "claimed" else None)
            for row in rows
            if row[job] is not None
        ]
        return rows[0][at["db_now"]], results

    def unclaimed(self, candidates: Sequence[Candidate]) -> set[tuple[str, datetime]]:
        """Of these occurrences, the (job, fire time) of those no run row holds yet: one read,
        nothing written."""
        with self.connection() as conn:
            return read_unclaimed(conn, candidates)

    def reclaim(
        self,
        agent_id: str,
        jobs: Sequence[str] | None,
        capacity: int,
        proceed: Callable[[], bool] = lambda: True,
    ) -> list[Lease]:
        """Take over pending requests, orphans and due retries of these jobs (attempt + 1;
        None: the jobs the agent's presence row lists); nothing when `proceed()` says no once
        a connection is at hand."""
        params = {"agent_id": agent_id, "jobs": None if jobs is None else literal(jobs),
                  "capacity": capacity}
        with self.connection() as conn, conn.cursor() as cur:
            if not proceed():
                return []
            rows = cur.execute(query("reclaim"), params).fetchall()
            return list(map(_leases(cur), rows))

    def heartbeat(self, agent_id: str, leases: Sequence[Lease]) -> set[int]:
        """Renew leases; returns the ids still owned (the others are lost)."""
        params = {
            "agent_id": agent_id,
            **arrays(leases, **LEASE_KEYS, leases="lease_seconds"),
        }
        with self.connection() as conn:
            return {row[0] for row in conn.execute(query("heartbeat"), params)}

    def complete(
        self, agent_id: str, completions: Sequence[Completion]
    ) -> dict[int, datetime | None]:
        """Record outcomes; returns {run id: retry_at} for the ones that were still owned."""
        lease_keys = {name: f"lease.{path}" for name, path in LEASE_KEYS.items()}
        params = {
            "agent_id": agent_id,
            **arrays(completions, **lease_keys, statuses="status", errors="error",
                     retries="lease.retry_on_failure", max_attempts="lease.max_attempts",
                     backoffs="backoff_seconds"),
        }
        with self.connection() as conn:
            return {row[0]: row[1] for row in conn.execute(query("complete"), params)}

    def housekeeping(
        self, agent_id: str, handlers: Sequence[str] | None, presence: dict[str, Any]
    ) -> Housekeeping:
        """Presence, reaper and max_runtime in one statement. `handlers` None: the agent's row
        keeps the list it has (`present` False when it has none)."""
        params = {
            "agent_id": agent_id,
            "handlers": None if handlers is None else literal(handlers),
            **presence,
        }
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query("housekeeping"), params).fetchone()
        assert row is not None
        identity = _record(DatabaseIdentity, row)
        self.identity.observe(identity)
        found = _record(Housekeeping, {
            **row, "present": bool(row["present"]), "peers": tuple(row["peers"])})
        return dataclasses.replace(found, identity=identity)

    def poll(self, agent_id: str | None) -> tuple[str, bool]:
        """Without LISTEN: a fingerprint of the schedules, and whether runs of the jobs in this
        agent's row want an owner."""
        with self.connection() as conn:
            row = conn.execute(query("poll"), {"agent_id": agent_id}).fetchone()
        assert row is not None
        return str(row[0]), bool(row[1])

    def release(self, agent_id: str, leases: Sequence[Lease]) -> int:
        """Hand these runs back: their leases end now. Again if it lost a deadlock (a reaper or a
        completion takes the same rows in another order): else they would wait out their leases."""
        params = {
            "agent_id": agent_id,
            **arrays(leases, ids="id", lease_tokens="lease_token"),
        }

        def release() -> int:
            with self.connection() as conn:
                return conn.execute(query("release"), params).rowcount

        return retry_conflicts(release)

    def agent_stopped(self, agent_id: str) -> None:
        with self.connection() as conn:
            conn.execute(query("agent_stopped"), {"agent_id": agent_id})

    # -- manual runs, history, presence ------------------------------------------------------

    def request_runs(
        self, job_name: str, fire_times: Sequence[datetime], kind: str
    ) -> list[datetime]:
        """Queue manual or backfill occurrences; returns the fire times that were new."""
        return [queued.fire_time for queued in self.queue_runs(job_name, fire_times, kind)]

    def queue_runs(
        self, job_name: str, fire_times: Sequence[datetime], kind: str
    ) -> list[Queued]:
        """Queue manual or backfill occurrences; returns the runs that were new. Every
        listening agent hears of them (NOTIFY, once they are committed) and takes its share."""
        with self.connection() as conn:
            exists = conn.execute(query("schedule_exists"), {"job_name": job_name}).fetchone()
            if not exists:
                raise UnknownJob(f"no schedule for job {job_name!r}")
            rows = conn.execute(
                query("request_run"),
                {"job_name": job_name, "fire_times": list(fire_times), "kind": kind},
            ).fetchall()
            conn.execute(query("wake_agents"))
        return [Queued(run_id, job_name, fire_time) for run_id, fire_time in rows]

    def queued_runs(self, queued: Sequence[Queued]) -> list[QueuedRun]:
        """Where these queued runs stand now, in their order (one read, planned anew each
        time as `unclaimed` is: a plan kept from an emptier table would scan it)."""
        params = arrays(queued, ids="id", fire_times="fire_time")
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query("queued_runs"), params, prepare=False).fetchall()
        return [
            QueuedRun(run, row["state"], row["status"], row["attempt"], row["error"])
            for run, row in zip(queued, rows, strict=True)
        ]

    def list_runs(
        self, job_name: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        params = {"job_name": job_name, "status": status, "limit": limit}
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(query("list_runs"), params))

    def list_agents(self) -> list[dict[str, Any]]:
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(query("list_agents")))

    def listener(self, agent_id: str | None = None) -> Listener | Poller:
        """Notifications: LISTEN on listen_dsn if set, else on a direct connection; behind a
        pooler without listen_dsn (LISTEN through it never hears anything), a poll."""
        listen_dsn = self.listen_dsn
        if listen_dsn:
            return Listener(
                lambda: connect(listen_dsn, self.schema, self.options, configured=False),
                self.schema,
                must_be_direct=True,
            )
        if self.pooling == "direct":
            return Listener(self.direct, self.schema)
        return Poller(lambda: self.poll(agent_id), self.poll_seconds)
