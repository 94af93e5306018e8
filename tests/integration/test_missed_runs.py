"""Missed occurrences, as the operator's status counts them: an occurrence that a backfill ran
happened; a manual run at some other instant covers no occurrence."""

from __future__ import annotations

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import Schedule
from claimsched_operator.observations import OccurrenceCounter, refresh

from .support import sql

EVERY_FIVE = "*/5 * * * *"


def _occurrences(dsn: str) -> list[str]:
    """Insert a schedule active for 3 hours; returns its settled occurrences (fire times)."""
    sql(
        dsn,
        "INSERT INTO job_schedule (job_name, schedule, source, active_since) "
        "VALUES ('report', %s, 'operator', date_trunc('hour', now()) - interval '3 hours')",
        [EVERY_FIVE],
    )
    rows = sql(
        dsn,
        "SELECT t FROM job_schedule s, generate_series(s.active_since + interval '5 minutes', "
        "  now() - make_interval(secs => s.catch_up_window_seconds + s.lease_seconds), "
        "  interval '5 minutes') AS t",
    )
    return [row[0] for row in rows]


def _run(dsn: str, fire_time: object, kind: str) -> None:
    sql(
        dsn,
        "INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, attempt) "
        "VALUES ('report', %s, %s, 'done', 'a', 1)",
        [fire_time, kind],
    )


def _missed(store: Store) -> tuple[int, int]:
    observed = refresh(
        OwnedSchedules(store), {"report": Schedule(EVERY_FIVE)}, OccurrenceCounter(), 90
    )
    missed = observed["report"].status.missed_runs
    return missed.last24h, missed.total


def test_occurrences_that_a_backfill_ran_are_not_missed(dsn: str, store: Store) -> None:
    times = _occurrences(dsn)
    assert len(times) >= 20
    for index, fire_time in enumerate(times):
        _run(dsn, fire_time, "backfill" if index % 3 == 0 else "scheduled")
    assert _missed(store) == (0, 0)


def test_a_manual_run_between_occurrences_does_not_hide_a_missed_one(
    dsn: str, store: Store
) -> None:
    times = _occurrences(dsn)
    for fire_time in times[1:]:
        _run(dsn, fire_time, "scheduled")
    sql(
        dsn,
        "INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, attempt) "
        "VALUES ('report', %s::timestamptz + interval '61 seconds', 'manual', 'done', 'a', 1)",
        [times[0]],
    )
    assert _missed(store) == (1, 1)
