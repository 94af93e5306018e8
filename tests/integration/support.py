"""Small helpers for integration tests: reading the claim table, running SQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from claimsched.db import Store
from claimsched.records import Candidate


def sql(
    dsn: str, statement: str | psycopg.sql.Composable, params: Any = None
) -> list[tuple[Any, ...]]:
    """Run one statement on `dsn` (as whoever it logs in as) in claimsched's schema."""
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


#: What a role let CREATE in claimsched's schema would put there: a gen_random_uuid() that empties
#: the scopes and fixes the lease token, and a now() that never ends a lease (the functions must
#: find the built-in ones first).
HIJACK = """
CREATE FUNCTION claimsched.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM claimsched.agent_scopes;
    RETURN '00000000-0000-0000-0000-000000000001';
END $$;
CREATE FUNCTION claimsched.now() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT 'infinity'::timestamptz $$
"""


#: What an agent says of itself in housekeeping (claimsched.run.housekeeping.presence).
PRESENCE = {"hostname": "h", "pod": None, "namespace": None, "version": "t", "ttl_seconds": 9,
            "tzdata": "2025b"}


def due(store: Store, job: str, *fire_times: datetime, **fields: Any) -> list[Candidate]:
    """Claim candidates of `job` at `fire_times`, computed from its schedule as stored now (its
    active_since, read in one query), as an agent that has just read the schedule proposes them."""
    with store.connection() as conn:
        row = conn.execute("SELECT coalesce((SELECT active_since FROM job_schedule"
                           " WHERE job_name = %s), now())", [job]).fetchone()
    assert row is not None
    return [Candidate(job, fire_time, row[0], **fields) for fire_time in fire_times]


def statuses(dsn: str, job: str) -> list[str]:
    """The statuses of a job's runs, in fire time order."""
    return [r["status"] for r in runs(dsn, job)]


@contextmanager
def explained(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], list[str]]]:
    """A connection in claimsched's schema and the plans of its statements, nested ones too
    (auto_explain), in the order they ran."""
    plans: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        conn.execute("LOAD 'auto_explain'")
        for setting, value in {"log_min_duration": "0", "log_nested_statements": "on",
                               "log_level": "notice"}.items():
            conn.execute(f"SET auto_explain.{setting} = {value}")
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        yield conn, plans
