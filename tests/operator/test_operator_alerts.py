"""Per-schedule alerts from the one status statement, on a real Postgres: the failure streak,
failing with its recovery hysteresis, and a start that is late past its grace
(startingDeadlineSeconds, or the schedule's default)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import Schedule
from claimsched_operator.models import rfc3339
from claimsched_operator.observations import Alerting, Observation, OccurrenceCounter, refresh

JOB = "nightly"
EVERY = Schedule("@every 10s")


@pytest.fixture
def owned(dsn: str) -> Iterator[OwnedSchedules]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO claimsched.job_schedule (job_name, schedule, source, owner, active_since)
            VALUES (%s, '@every 10s', 'operator', 'default/nightly', now() - interval '1 hour')
        """, [JOB])
    store = Store(dsn, max_size=2)
    store.open()
    try:
        yield OwnedSchedules(store)
    finally:
        store.close()


def finish(dsn: str, *statuses: str) -> None:
    """Runs of the next occurrences after the latest one (oldest first), ending so."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for status in statuses:
            conn.execute("""
                INSERT INTO claimsched.job_runs (job_name, fire_time, status, attempt, claimed_by)
                SELECT %(job)s, coalesce(max(fire_time) + interval '10 seconds',
                                         date_trunc('minute', now()) - interval '30 minutes'),
                       %(status)s, 1, 'a1'
                FROM claimsched.job_runs WHERE job_name = %(job)s
            """, {"job": JOB, "status": status})


def observe(owned: OwnedSchedules, alerting: Alerting, previous: Observation | None = None,
            failing_before: bool = False) -> Observation:
    return refresh(owned, {JOB: EVERY}, OccurrenceCounter(), 90,
                   {JOB: previous} if previous else None,
                   {JOB: (alerting, failing_before)})[JOB]


def test_failing_after_n_failures_in_a_row_until_m_successes_in_a_row(
        dsn: str, owned: OwnedSchedules) -> None:
    alerting = Alerting(failure_threshold=3, recovery_threshold=2)
    finish(dsn, "failed", "failed", "done", "failed", "failed", "skipped", "running")
    seen = observe(owned, alerting)
    assert seen.status.consecutive_failures == 2, "skipped and running runs are not outcomes"
    assert not seen.status.failing
    finish(dsn, "failed")
    seen = observe(owned, alerting, seen)
    assert (seen.status.consecutive_failures, seen.status.failing) == (3, True)
    finish(dsn, "done")
    seen = observe(owned, alerting, seen)
    assert (seen.status.consecutive_failures, seen.status.failing) == (0, True), "1 of 2"
    finish(dsn, "failed", "done")
    seen = observe(owned, alerting, seen)
    assert seen.status.failing, "a failure in between starts the count of successes again"
    finish(dsn, "done")
    seen = observe(owned, alerting, seen)
    assert not seen.status.failing, "two successes in a row recover"
    assert observe(owned, alerting, failing_before=True).status.failing is False


def test_a_restarted_operator_keeps_failing_from_the_resources_status(
        dsn: str, owned: OwnedSchedules) -> None:
    finish(dsn, "failed", "failed", "done")
    alerting = Alerting(failure_threshold=2, recovery_threshold=3)
    assert observe(owned, alerting, failing_before=True).status.failing
    assert not observe(owned, alerting, failing_before=False).status.failing


def test_the_streak_counts_at_most_the_latest_hundred_runs(
        dsn: str, owned: OwnedSchedules) -> None:
    finish(dsn, *["failed"] * 120)
    seen = observe(owned, Alerting(failure_threshold=100))
    assert (seen.status.consecutive_failures, seen.status.failing) == (100, True)


def test_an_occurrence_not_started_within_the_deadline_is_late(
        dsn: str, owned: OwnedSchedules) -> None:
    finish(dsn, "done")  # half an hour ago; nothing since
    (last,), = sql_rows(dsn, "SELECT max(fire_time) FROM claimsched.job_runs")
    since = rfc3339(last + timedelta(seconds=10))  # the oldest occurrence without a run
    seen = observe(owned, Alerting())
    assert (seen.status.late, seen.status.late_fire_time) == (True, since), \
        "no deadline: the default grace (one period, at least 10 s)"
    seen = observe(owned, Alerting(starting_deadline_seconds=30))
    assert (seen.status.late, seen.status.late_fire_time) == (True, since)
    due = EVERY.latest_at_or_before(_db_now(dsn))
    assert due is not None
    with psycopg.connect(dsn, autocommit=True) as conn:  # it starts at last (catch-up)
        conn.execute("""
            INSERT INTO claimsched.job_runs (job_name, fire_time, status, attempt, claimed_by)
            VALUES (%s, %s, 'running', 1, 'a1')""", [JOB, due])
    assert not observe(owned, Alerting(starting_deadline_seconds=30)).status.late
    assert not observe(owned, Alerting(starting_deadline_seconds=7200)).status.late, \
        "active for an hour: no occurrence is two hours overdue"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE claimsched.job_schedule SET enabled = false")
        conn.execute("DELETE FROM claimsched.job_runs WHERE fire_time = %s", [due])
    assert not observe(owned, Alerting(starting_deadline_seconds=30)).status.late, "suspended"


def sql_rows(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(statement).fetchall()


def _db_now(dsn: str) -> datetime:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now
