"""Small helpers for integration tests: waiting on conditions, reading the claim table."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll until `condition()` is truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def sql(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def runs(dsn: str, job: str | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        cur.execute(
            "SELECT * FROM job_runs WHERE %(job)s::text IS NULL OR job_name = %(job)s "
            "ORDER BY fire_time, id",
            {"job": job},
        )
        return cur.fetchall()


def past(seconds: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=seconds)
