"""The latest run, success and failure in the operator's status come from a job's recent runs
when it has any, and from further back when all its runs are older than its window."""

from __future__ import annotations

from typing import Any

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import Schedule
from claimsched_operator.models import rfc3339
from claimsched_operator.observations import OccurrenceCounter, refresh

from .support import sql

HOURLY = "0 * * * *"


def _runs(dsn: str, *runs: tuple[int, str]) -> None:
    """Runs of 'report' `days` ago at the hour, with a status each; active for 10 days."""
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule, source, active_since) "
             "VALUES ('report', %s, 'operator', now() - interval '10 days')", [HOURLY])
    for days, status in runs:
        sql(dsn, "INSERT INTO job_runs (job_name, fire_time, status, claimed_by, attempt, error) "
                 "VALUES ('report', date_trunc('hour', now()) - make_interval(days => %s), %s, "
                 "'a', 1, CASE WHEN %s = 'failed' THEN 'boom' END)", [days, status, status])


def _status(store: Store, retention_days: int) -> dict[str, Any]:
    observed = refresh(OwnedSchedules(store), {"report": Schedule(HOURLY)}, OccurrenceCounter(),
                       retention_days)
    dumped = observed["report"].status.dump()
    return {key: dumped.get(key) for key in (
        "lastFireTime", "lastSuccessfulTime", "lastRun", "consecutiveFailures", "activeRuns",
        "orphanedRuns")}


def _day(dsn: str, days: int) -> str:
    """The fire time of a run `days` ago, as the status writes it."""
    return rfc3339(sql(dsn, "SELECT date_trunc('hour', now()) - make_interval(days => %s)",
                       [days])[0][0])


def test_runs_older_than_the_window_still_give_the_latest_run_success_and_failure(
        dsn: str, store: Store) -> None:
    _runs(dsn, (9, "running"), (8, "orphaned"), (6, "done"), (5, "failed"), (4, "failed"),
          (3, "pending"))
    old_only = _status(store, 2)  # every run is older than the window: looked up further back
    assert old_only["lastFireTime"] == _day(dsn, 4)  # not the pending one
    assert old_only["lastRun"]["status"] == "failed"
    assert old_only["lastSuccessfulTime"] == _day(dsn, 6)
    assert old_only["consecutiveFailures"] == 2
    assert old_only["activeRuns"] == 1
    assert old_only["orphanedRuns"]["current"] == 1
    assert _status(store, 90) == old_only  # the same runs, all inside the window


def test_the_newest_runs_of_the_window_are_the_latest(dsn: str, store: Store) -> None:
    _runs(dsn, (6, "failed"), (1, "done"), (0, "failed"))
    recent = _status(store, 2)
    assert recent["lastFireTime"] == _day(dsn, 0)
    assert recent["lastSuccessfulTime"] == _day(dsn, 1)
    assert recent["consecutiveFailures"] == 1
