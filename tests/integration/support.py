"""Small helpers for integration tests: reading the claim table, running SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg


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
