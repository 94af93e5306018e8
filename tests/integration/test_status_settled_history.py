"""The operator counts each job's settled history once and then only what entered and left
it: its statuses stay those of a refresh that counts everything afresh, through a backfill,
retention, a job that goes and comes back, schedule changes and a restart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg.sql import SQL

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import Schedule
from claimsched_operator.history import SettledHistory
from claimsched_operator.observations import OccurrenceCounter, refresh

from .support import past
from .support import sql as run_sql

HOURLY = "0 * * * *"
_DAY = timedelta(days=1)
JOBS = {
    "plain": "active_since = now() - interval '200 days'",
    "young": "active_since = now() - interval '5 hours'",
    "week": "active_since = now() - interval '7 days'",
    "slow": "active_since = now() - interval '200 days', catch_up_window_seconds = 864000",
    "off": "active_since = now() - interval '200 days', enabled = false, "
           "updated_at = now() - interval '20 days'",
    "resting": "active_since = now() - interval '200 days', "
               "suspend_until = now() - interval '40 days'",
    "quiet": "active_since = now() - interval '200 days'",  # no runs at all
}


def _seed(dsn: str) -> dict[str, Schedule]:
    """Hourly jobs of every kind with 120 days of runs of every status and kind, some hours
    missing; the newest runs running, pending or orphaned."""
    for job, columns in JOBS.items():
        run_sql(dsn, "INSERT INTO job_schedule (job_name, schedule, source, owner) "
                     "VALUES (%s, %s, 'operator', 'default/' || %s)", [job, HOURLY, job])
        run_sql(dsn, SQL("UPDATE job_schedule SET {} WHERE job_name = %s").format(SQL(columns)),
                [job])
    run_sql(dsn, """
        INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, attempt, error,
                              orphan_count, started_at, finished_at)
        SELECT s.job_name, date_trunc('hour', now()) - make_interval(hours => h)
                           + CASE WHEN h % 97 = 5 THEN interval '17 min' ELSE '0' END,
               CASE WHEN h % 97 = 5 THEN 'manual' WHEN h % 31 = 2 THEN 'backfill'
                    ELSE 'scheduled' END,
               CASE WHEN h = 0 THEN 'running' WHEN h = 1 THEN 'pending'
                    WHEN h % 53 = 3 THEN 'orphaned' WHEN h % 41 = 4 THEN 'running'
                    WHEN h % 29 = 6 THEN 'skipped' WHEN h % 7 = 1 THEN 'failed'
                    ELSE 'done' END,
               'agent-1', 1 + h % 3,
               CASE WHEN h % 7 = 1 THEN 'boom' || CASE WHEN h % 2 = 0
                                                      THEN ': attempts exhausted' ELSE '' END
               END,
               h % 2, date_trunc('hour', now()) - make_interval(hours => h),
               date_trunc('hour', now()) - make_interval(hours => h) + interval '1 s'
        FROM job_schedule s, generate_series(0, 24 * 120) AS h
        WHERE s.job_name <> 'quiet' AND h % 23 <> 9""")
    return {job: Schedule(HOURLY) for job in JOBS}


def _dump(observed: dict[str, Any]) -> dict[str, Any]:
    return {job: o.status.dump() for job, o in observed.items()}


class Operator:
    """One operator process: its occurrence counter and settled history live between
    refreshes; `check` compares its statuses with a fresh operator's on the same data."""

    def __init__(self, store: Store, schedules: dict[str, Schedule]) -> None:
        self.owned, self.schedules = OwnedSchedules(store), schedules
        self.counter, self.history = OccurrenceCounter(), SettledHistory()

    def refresh(self, retention_days: int = 90) -> dict[str, Any]:
        return _dump(refresh(self.owned, self.schedules, self.counter, retention_days,
                             history=self.history))

    def check(self, retention_days: int = 90) -> dict[str, Any]:
        kept = self.refresh(retention_days)
        fresh = _dump(refresh(self.owned, self.schedules, OccurrenceCounter(), retention_days))
        assert kept == fresh
        return kept


@pytest.fixture
def operator(dsn: str, store: Store) -> Operator:
    return Operator(store, _seed(dsn))


def test_the_figures_of_the_split_history_are_the_whole_windows(dsn: str,
                                                                  store: Store) -> None:
    """Settled plus recent: what a straightforward count over each job's windows gives."""
    _seed(dsn)
    history = SettledHistory()
    for _ in range(2):  # counted afresh, then from what the first refresh counted
        for row in OwnedSchedules(store).status_rows(history.known(JOBS), 90):
            history.complete(row)
            plain = run_sql(dsn, """
                SELECT count(*) FILTER (WHERE fire_time > %(start)s AND fire_time <= %(end)s),
                       max(fire_time) FILTER (WHERE fire_time > %(start)s
                                                AND fire_time <= %(end)s),
                       max(fire_time) FILTER (WHERE fire_time > %(window)s
                                                 OR status IN ('running', 'orphaned'))
                FROM job_runs WHERE job_name = %(job)s AND kind <> 'manual'""",
                {"job": row["job_name"], "start": row["history_start"],
                 "end": row["settled_end"],
                 "window": min(row["history_start"], row["db_now"] - _DAY)})[0]
            assert (row["seen_history"], row["latest_seen"], row["latest_occurrence"]) == plain
        history.finish()
    assert history.epoch == 0


def test_a_kept_history_gives_the_statuses_of_a_fresh_count(operator: Operator) -> None:
    cold = operator.check()
    assert operator.check() == cold
    assert {job for job, status in cold.items() if status["missedRuns"]["total"]} >= {
        "plain", "week", "slow", "resting"}
    operator.check(89)  # the window's start moved a day: what left it is taken off


@pytest.mark.parametrize("change", [
    "backfill", "retention", "job gone and back", "row gone and back", "active since",
    "catch-up window", "disabled", "resumed", "restart",
])
def test_after_a_change_the_statuses_are_those_of_a_fresh_count(
        operator: Operator, dsn: str, store: Store, change: str) -> None:
    before = operator.check()
    CHANGES[change](operator, dsn, store)
    after = operator.check()
    operator.check()
    if change in ("backfill", "retention"):
        assert after != before


def _backfill(operator: Operator, dsn: str, store: Store) -> None:
    hours = [past(3600 * h) for h in range(24 * 30, 24 * 60) if h % 23 == 9]
    assert store.listings.request_runs("plain", [t.replace(minute=0, second=0) for t in hours],
                              "backfill")


def _retention(operator: Operator, dsn: str, store: Store) -> None:
    store.admin.maintain(30)  # the old months are in the default partition: purged past 30 days


def _job_gone_and_back(operator: Operator, dsn: str, store: Store) -> None:
    schedules = operator.schedules
    operator.schedules = {job: s for job, s in schedules.items() if job != "plain"}
    operator.check()
    _backfill(operator, dsn, store)
    operator.schedules = schedules


def _row_gone_and_back(operator: Operator, dsn: str, store: Store) -> None:
    row = run_sql(dsn, "DELETE FROM job_schedule WHERE job_name = 'week' RETURNING schedule")
    assert row
    operator.check()
    run_sql(dsn, "INSERT INTO job_schedule (job_name, schedule, source, active_since) "
                 "VALUES ('week', %s, 'operator', now() - interval '3 days')", [HOURLY])


def _active_since(operator: Operator, dsn: str, store: Store) -> None:
    run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '50 days' "
                 "WHERE job_name IN ('plain', 'slow')")
    operator.check()
    run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '150 days' "
                 "WHERE job_name = 'plain'")


def _catch_up_window(operator: Operator, dsn: str, store: Store) -> None:
    run_sql(dsn, "UPDATE job_schedule SET catch_up_window_seconds = 2678400 "
                 "WHERE job_name = 'plain'")
    operator.check()
    run_sql(dsn, "UPDATE job_schedule SET catch_up_window_seconds = 60 WHERE job_name = 'slow'")


def _disabled(operator: Operator, dsn: str, store: Store) -> None:
    run_sql(dsn, "UPDATE job_schedule SET enabled = false, updated_at = now() - interval '3 days'"
                 " WHERE job_name = 'plain'")


def _resumed(operator: Operator, dsn: str, store: Store) -> None:
    run_sql(dsn, "UPDATE job_schedule SET enabled = true, updated_at = now() "
                 "WHERE job_name = 'off'")


def _restart(operator: Operator, dsn: str, store: Store) -> None:
    _backfill(operator, dsn, store)
    operator.counter, operator.history = OccurrenceCounter(), SettledHistory()


CHANGES: dict[str, Callable[[Operator, str, Store], None]] = {
    "backfill": _backfill, "retention": _retention, "job gone and back": _job_gone_and_back,
    "row gone and back": _row_gone_and_back, "active since": _active_since,
    "catch-up window": _catch_up_window, "disabled": _disabled, "resumed": _resumed,
    "restart": _restart,
}


def test_a_warm_refresh_does_not_read_settled_history_again(operator: Operator,
                                                            dsn: str) -> None:
    """Only a backfill or retention changes settled history, and both say so: a run written
    there behind their back (here by hand) is not seen until one of them moves the epoch."""
    cold = operator.check()
    run_sql(dsn, "DELETE FROM job_runs WHERE job_name = 'plain' AND kind <> 'manual' "
                 "AND fire_time BETWEEN now() - interval '60 days' AND now() - interval '50 days'")
    kept = operator.refresh()
    assert kept["plain"]["missedRuns"] == cold["plain"]["missedRuns"]
    fresh = _dump(refresh(operator.owned, operator.schedules, OccurrenceCounter(), 90))
    assert fresh["plain"]["missedRuns"]["total"] > cold["plain"]["missedRuns"]["total"]
    run_sql(dsn, "UPDATE history_epoch SET epoch = epoch + 1")
    assert operator.refresh() == fresh

