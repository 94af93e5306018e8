"""What the failover, partition and pooler scenarios share: the app's jobs, agent settings, and
the checks of exactly-once read from the database the agents ended on."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import psycopg
from bench.chaos.harness import Replicas

# An occurrence every second whose handler works 1.5 s, so runs are always in flight; its one
# effect is written with its receipt in the app's own transaction. Failures (the database away
# mid-run) are retried, so no occurrence is missed once the database is back.
TICK = {
    "name": "tick",
    "schedule": "@every 1s",
    "after": "effect",
    "sleep": 1.5,
    "catch_up_policy": "All",
    "concurrency_policy": "Allow",
    "lease_seconds": 6,
    "heartbeat_seconds": 1,
    "max_attempts": 20,
    "retry_on_failure": True,
}

# Agents that give up on a silent database quickly and retry often (each shorter than a lease).
FAST = {
    "CLAIMSCHED_RETRY_BACKOFF_SECONDS": "0.5",
    "CLAIMSCHED_STATEMENT_TIMEOUT_SECONDS": "4",
    "CLAIMSCHED_LOCK_TIMEOUT_SECONDS": "2",
    "CLAIMSCHED_TCP_KEEPALIVE_SECONDS": "2",
}


def query(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]] | None:
    """Rows, or None while the database is away (mid-failover)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []
    except psycopg.Error:
        return None


def done_count(dsn: str, job: str = "tick") -> int:
    rows = query(
        dsn,
        "SELECT count(*) FROM claimsched.job_runs WHERE job_name = %s AND status = 'done'",
        [job],
    )
    return rows[0][0] if rows else 0


def first_fire_time(dsn: str, job: str = "tick") -> datetime:
    rows = query(dsn, "SELECT min(fire_time) FROM claimsched.job_runs WHERE job_name = %s", [job])
    assert rows and rows[0][0] is not None
    return rows[0][0]  # type: ignore[no-any-return]


def all_done_between(dsn: str, start: datetime, end: datetime, job: str = "tick") -> bool:
    """Every occurrence from `start` to `end` (one a second) is done."""
    rows = query(
        dsn,
        "SELECT count(*) FROM generate_series(%s::timestamptz, %s::timestamptz, '1 second') g "
        "LEFT JOIN claimsched.job_runs r ON r.job_name = %s AND r.fire_time = g "
        "WHERE r.status IS DISTINCT FROM 'done'",
        [start, end, job],
    )
    return rows == [(0,)]


def assert_exactly_once(group: Replicas, start: datetime, end: datetime, job: str = "tick") -> None:
    """No occurrence has two effects; in [start, end] every occurrence is done with exactly one
    effect. (Past `end` an agent may have been killed between an effect and its completion.)"""
    effects = Counter(
        t for (t,) in group.query("SELECT fire_time FROM public.ledger WHERE job = %s", [job])
    )
    assert all(n == 1 for n in effects.values()), f"duplicate effects: {effects.most_common(3)}"
    statuses = dict(
        group.query("SELECT fire_time, status FROM claimsched.job_runs WHERE job_name = %s", [job])
    )
    inside = sorted(t for t, status in statuses.items() if start <= t <= end and status == "done")
    effected = {t for t in effects if start <= t <= end}
    odd = {t: statuses.get(t) for t in set(inside) ^ effected}
    assert not odd, f"done without an effect, or an effect without done: {odd}"
    gaps = [b - a for a, b in itertools.pairwise(inside) if b - a != timedelta(seconds=1)]
    assert inside and inside[0] == start and inside[-1] == end and not gaps, f"missed: {gaps}"
