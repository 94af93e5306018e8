"""The agent's hot path: claim what is due, keep its leases, record outcomes, housekeep, reclaim
what wants an owner, and leave. Each is one statement (sql/functions/ decides)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from ..conflicts import retry_conflicts
from ..records import Candidate, ClaimResult, Completion, DatabaseIdentity, Housekeeping, Lease
from .arrays import LEASE_KEYS, arrays, claim_params, literal
from .connection import Connect
from .identity import IdentityWatch
from .queries import call, query

R = TypeVar("R")


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


def _record(kind: type[R], row: dict[str, Any]) -> R:
    """The record dataclass `kind` from a row holding its fields (a field with a default may
    be missing)."""
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    return kind(**{name: row[name] for name in names if name in row})


def read_unclaimed(conn: psycopg.Connection[Any], candidates: Sequence[Candidate]
                   ) -> set[tuple[str, datetime]]:
    """Claims.unclaimed on `conn`. Planned anew at each call (a plan is ~0.1 ms): a plain
    read can't set enable_seqscan as our functions do, and a plan kept from when the runs'
    partition was small would scan it for every key ever after (test_run_plans)."""
    params = arrays(candidates, jobs="job_name", fire_times="fire_time")
    rows = conn.execute(query("unclaimed"), params, prepare=False)
    return {(job, fire) for job, fire in rows}


class Claims:
    """The statements an agent sends about runs: claims, leases, outcomes, its presence."""

    def __init__(self, connect: Connect, identity: IdentityWatch) -> None:
        self._connect = connect
        self._identity = identity

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
        with self._connect() as conn, conn.cursor() as cur:
            if not proceed():
                return None
            rows = cur.execute(call("cs_claim_v2"), params).fetchall()
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
        with self._connect() as conn:
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
        with self._connect() as conn, conn.cursor() as cur:
            if not proceed():
                return []
            rows = cur.execute(call("cs_reclaim_v2"), params).fetchall()
            return list(map(_leases(cur), rows))

    def heartbeat(self, agent_id: str, leases: Sequence[Lease]) -> set[int]:
        """Renew leases; returns the ids still owned (the others are lost)."""
        params = {
            "agent_id": agent_id,
            **arrays(leases, **LEASE_KEYS, leases="lease_seconds"),
        }
        with self._connect() as conn:
            return {row[0] for row in conn.execute(call("cs_heartbeat_v2"), params)}

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
        with self._connect() as conn:
            return {row[0]: row[1] for row in conn.execute(call("cs_complete_v2"), params)}

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
        with self._connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(call("cs_housekeeping_v2"), params).fetchone()
        assert row is not None
        identity = _record(DatabaseIdentity, row)
        self._identity.observe(identity)
        found = _record(Housekeeping, {
            **row, "present": bool(row["present"]), "peers": tuple(row["peers"])})
        return dataclasses.replace(found, identity=identity)

    def poll(self, agent_id: str | None) -> tuple[str, bool]:
        """Without LISTEN: a fingerprint of the schedules, and whether runs of the jobs in this
        agent's row want an owner."""
        with self._connect() as conn:
            row = conn.execute(call("cs_poll_v2"), {"agent_id": agent_id}).fetchone()
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
            with self._connect() as conn:
                return conn.execute(call("cs_release_v2"), params).rowcount

        return retry_conflicts(release)

    def agent_stopped(self, agent_id: str) -> None:
        with self._connect() as conn:
            conn.execute(call("cs_agent_stopped_v2"), {"agent_id": agent_id})
