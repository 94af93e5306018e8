"""Status from the database: one aggregate statement per database per interval, then pure
Python per job (next fire times, missed occurrences)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from claimsched.db import Store
from claimsched.db.queries import query
from claimsched.schedules import Schedule

from .models import FailedRuns, LastRun, MissedRuns, ObservedStatus, OrphanedRuns, rfc3339

log = logging.getLogger("claimsched.operator.status")

NEXT_FIRE_TIMES = 5


@dataclass(frozen=True)
class Observation:
    """One job's row of the aggregate query, and the status derived from it."""

    job_name: str
    status: ObservedStatus
    exhausted_day: int
    enabled: bool


class OccurrenceCounter:
    """Counts a schedule's occurrences in sliding windows ``(start, end]`` incrementally, so a
    90-day window of a minutely cron costs its full enumeration once, then only the edges."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], tuple[datetime, datetime, int]] = {}

    def count(self, key: str, schedule: Schedule, start: datetime, end: datetime) -> int:
        if end <= start:
            return 0
        slot = (key, schedule.expression, schedule.time_zone)
        cached = self._cache.get(slot)
        if cached and cached[0] <= start <= cached[1] and end >= cached[1]:
            old_start, old_end, total = cached
            total += _span(schedule, old_end, end) - _span(schedule, old_start, start)
        else:
            total = _span(schedule, start, end)
        self._cache[slot] = (start, end, total)
        return total

    def forget(self, key: str) -> None:
        for slot in [s for s in self._cache if s[0] == key]:
            del self._cache[slot]


def _span(schedule: Schedule, start: datetime, end: datetime) -> int:
    """Occurrences in ``(start, end]``: arithmetic for @every, enumeration for cron."""
    if end <= start:
        return 0
    if schedule.expression.startswith("@every"):
        step = int(schedule.period_hint.total_seconds())
        return int(end.timestamp() // step) - int(start.timestamp() // step)
    return len(schedule.between(start, end))


def fetch(store: Store, jobs: list[str], retention_days: int) -> list[dict[str, Any]]:
    """The one statement of a refresh: every given job's counters, latest runs and agents."""
    params = {"jobs": jobs, "retention_days": retention_days}
    with store.connection() as conn:
        cur = conn.execute(query("operator_status"), params)
        names = [column.name for column in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def observe(
    row: Mapping[str, Any],
    schedule: Schedule,
    counter: OccurrenceCounter,
    previous_missed_time: str | None = None,
) -> Observation:
    """The status of one job from its row of the aggregate query."""
    now: datetime = row["db_now"]
    job: str = row["job_name"]
    upcoming = schedule.upcoming(now, NEXT_FIRE_TIMES) if row["enabled"] else []
    end: datetime = row["settled_end"]
    expected_day = counter.count(f"{job}/day", schedule, row["day_start"], end)
    expected_all = counter.count(f"{job}/all", schedule, row["history_start"], end)
    missed_day = max(0, expected_day - row["seen_day"])
    missed_all = max(0, expected_all - row["seen_history"], missed_day)
    last_missed = previous_missed_time if missed_all else None
    if missed_all:
        latest = schedule.latest_at_or_before(end)
        if latest is not None and latest > row["history_start"] and (
            row["latest_seen"] is None or latest > row["latest_seen"]
        ):
            last_missed = rfc3339(latest)  # the newest settled occurrence has no run
    last_run = None
    if row["last_fire_time"] is not None:
        last_run = LastRun(
            fire_time=rfc3339(row["last_fire_time"]),
            status=row["last_status"],
            attempt=max(1, int(row["last_attempt"])),
            claimed_by=(row["last_claimed_by"] or None) and row["last_claimed_by"][:253],
            started_at=_time(row["last_started_at"]),
            finished_at=_time(row["last_finished_at"]),
            error=(row["last_error"] or None) and row["last_error"][:4096],
        )
    status = ObservedStatus(
        next_fire_time=rfc3339(upcoming[0]) if upcoming else None,
        next_fire_times=[rfc3339(t) for t in upcoming],
        last_fire_time=last_run.fire_time if last_run else None,
        last_successful_time=_time(row["last_successful_time"]),
        last_run=last_run,
        active_runs=int(row["active_runs"]),
        orphaned_runs=OrphanedRuns(
            current=int(row["orphaned_current"]), last24h=int(row["orphaned_day"])
        ),
        failed_runs=FailedRuns(last24h=int(row["failed_day"])),
        missed_runs=MissedRuns(last24h=missed_day, total=missed_all, last_missed_time=last_missed),
        live_agents=int(row["live_agents"]),
    )
    return Observation(job, status, int(row["exhausted_day"]), bool(row["enabled"]))


def _time(t: datetime | None) -> str | None:
    return rfc3339(t) if t is not None else None


def refresh(
    store: Store,
    schedules: Mapping[str, Schedule],
    counter: OccurrenceCounter,
    retention_days: int,
    previous_missed: Mapping[str, str | None] | None = None,
) -> dict[str, Observation]:
    """Observe every job of one database with one statement."""
    if not schedules:
        return {}
    rows = fetch(store, sorted(schedules), retention_days)
    found: dict[str, Observation] = {}
    for row in rows:
        schedule = schedules.get(row["job_name"])
        if schedule is None:
            continue
        prior = (previous_missed or {}).get(row["job_name"])
        found[row["job_name"]] = observe(row, schedule, counter, prior)
    return found

