"""Status from the database: one aggregate statement per database per interval, then pure
Python per job (next fire times, missed occurrences)."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any

from claimsched.db import OwnedSchedules, redact_text
from claimsched.schedule.deadlines import Lateness, grace, lateness
from claimsched.schedule.schedules import Schedule

from .history import SettledHistory
from .models import FailedRuns, LastRun, MissedRuns, ObservedStatus, OrphanedRuns, rfc3339

log = logging.getLogger("claimsched.operator.status")

NEXT_FIRE_TIMES = 5
# Young objects a refresh may leave for the collector to walk (milliseconds); more are promoted.
PROMOTED_AFTER = 50_000


@dataclass(frozen=True)
class Alerting:
    """A ClaimSchedule's alert settings: spec.startingDeadlineSeconds (None: the schedule's
    default grace, claimsched.schedule.deadlines), spec.failureThreshold and
    spec.recoveryThreshold."""

    starting_deadline_seconds: int | None = None
    failure_threshold: int = 3
    recovery_threshold: int = 1


@dataclass(frozen=True)
class Observation:
    """One job's row of the aggregate query, and the status derived from it."""

    job_name: str
    status: ObservedStatus
    exhausted_day: int
    enabled: bool
    inputs: tuple[Any, ...] = field(default=(), repr=False, compare=False)  # what status is of
    last_success: datetime | None = None  # fire time of the latest done run


class OccurrenceCounter:
    """What each job's schedule gave at the last refresh, so that a refresh pays only for what
    moved: occurrences in sliding windows ``(start, end]`` (a 90-day window of a minutely cron
    costs its enumeration once, then only the edges, and nothing while no edge passed a fire
    time), and the next fire times (the same until ``now`` reaches the first). A job's entries
    go when its schedule changes."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    def count(self, job: str, window: str, schedule: Schedule, start: datetime,
              end: datetime) -> int:
        """Occurrences in ``(start, end]``; `window` names one of the job's sliding windows."""
        if end <= start:
            return 0
        cached = self._job(job, schedule)
        windows = cached.windows
        old = windows.get(window)
        if old is not None and old.start <= start <= old.end <= end:
            gained, old.after_end = cached.advance(old.end, old.after_end, end)
            lost, old.after_start = cached.advance(old.start, old.after_start, start)
            old.start, old.end, old.total = start, end, old.total + gained - lost
            return old.total
        new = windows[window] = _Window(start, end, *_fresh_window(schedule, start, end))
        return new.total

    def upcoming(self, job: str, schedule: Schedule, now: datetime) -> list[str]:
        """The next `NEXT_FIRE_TIMES` fire times after ``now``, in RFC 3339."""
        cached = self._job(job, schedule)
        old = cached.upcoming
        if old is not None and old.at <= now:
            if not old.fires or old.fires[0] > now:
                return old.texts  # nothing passed: the same fire times
            kept = [i for i, fire in enumerate(old.fires) if fire > now]
            if kept and len(old.fires) == NEXT_FIRE_TIMES:
                more = schedule.upcoming(old.fires[-1], NEXT_FIRE_TIMES - len(kept))
                fires = [old.fires[i] for i in kept] + more
                texts = [old.texts[i] for i in kept] + [rfc3339(t) for t in more]
                cached.upcoming = _Upcoming(now, fires, texts)
                return texts
        shared_fires, shared_texts = _upcoming(schedule, now)
        cached.upcoming = _Upcoming(now, list(shared_fires), list(shared_texts))
        return cached.upcoming.texts

    def forget(self, job: str) -> None:
        self._jobs.pop(job, None)

    def _job(self, job: str, schedule: Schedule) -> _Job:
        cached = self._jobs.get(job)
        if cached is None or (cached.schedule is not schedule and cached.schedule != schedule):
            cached = self._jobs[job] = _Job(schedule)
        return cached


# Equal schedules with equal windows give equal answers, and most jobs of a refresh ask the same
# questions (their windows end at one instant and most start at one too): a fresh window, the
# latest fire time and the next fire times are computed once per schedule, not once per job.
@lru_cache(maxsize=8192)
def _fresh_window(schedule: Schedule, start: datetime, end: datetime
                  ) -> tuple[int, datetime | None, datetime | None]:
    """Occurrences in ``(start, end]`` and the first fire times after `start` and `end`."""
    return (schedule.count_between(start, end), schedule.next_after(start),
            schedule.next_after(end))


@lru_cache(maxsize=8192)
def _latest_at_or_before(schedule: Schedule, t: datetime) -> datetime | None:
    return schedule.latest_at_or_before(t)


@lru_cache(maxsize=8192)
def _upcoming(schedule: Schedule, now: datetime) -> tuple[tuple[datetime, ...], tuple[str, ...]]:
    fires = schedule.upcoming(now, NEXT_FIRE_TIMES)
    return tuple(fires), tuple(rfc3339(t) for t in fires)


@dataclass
class _Window:
    start: datetime
    end: datetime
    total: int
    after_start: datetime | None  # the first fire time after start (None: none ever)
    after_end: datetime | None


@dataclass(frozen=True)
class _Upcoming:
    at: datetime
    fires: list[datetime]
    texts: list[str]


@dataclass
class _Job:
    schedule: Schedule
    windows: dict[str, _Window] = field(default_factory=dict)
    upcoming: _Upcoming | None = None
    _after: tuple[datetime, datetime | None] | None = None  # the last next_after asked

    def next_after(self, t: datetime) -> datetime | None:
        """`Schedule.next_after`, remembering the last answer: the windows share their end."""
        if self._after is None or self._after[0] != t:
            self._after = (t, self.schedule.next_after(t))
        return self._after[1]

    def advance(self, old: datetime, after: datetime | None,
                new: datetime) -> tuple[int, datetime | None]:
        """Occurrences in ``(old, new]`` and the first fire time after ``new``, given ``after``,
        the first fire time after ``old``: free while ``new`` has not reached it."""
        if after is None or new < after:
            return 0, after
        return self.schedule.count_between(old, new), self.next_after(new)


# What a schedule gives for a job's windows: the next fire times (RFC 3339), and how many
# occurrences its day and its whole history window hold. A pure function of the schedule and
# the bounds, which most jobs of a refresh share with others of their schedule (their windows
# end at one instant, most start at one too): computed once per refresh for them, not per job.
Figures = tuple[list[str], int, int]


def observe(
    row: Mapping[str, Any],
    schedule: Schedule,
    counter: OccurrenceCounter,
    previous: Observation | None = None,
    alerting: Alerting = Alerting(),
    failing_before: bool = False,
    shared: dict[tuple[Any, ...], Figures] | None = None,
) -> Observation:
    """The status of one job from its row of the aggregate query. When everything the status
    is made of is as at the previous refresh (most jobs, most of the time), that observation is
    returned as it is: nothing is built or validated again. `failing_before` is whether the
    resource's status said failing, for the first observation after a start. `shared`: the
    figures of the schedule already asked this refresh, by schedule and window bounds."""
    now: datetime = row["db_now"]
    late = _late(row, schedule, alerting.starting_deadline_seconds)
    was_failing = previous.status.failing if previous is not None else failing_before
    failing = int(row["consecutive_successes"]) < alerting.recovery_threshold if was_failing \
        else int(row["consecutive_failures"]) >= alerting.failure_threshold
    job: str = row["job_name"]
    resumes = row["suspend_until"]
    at = (max(now, resumes) if resumes else now) if row["enabled"] else None
    end: datetime = row["settled_end"]
    day_start: datetime = row["day_start"]
    history_start: datetime = row["history_start"]
    key = (schedule, at, day_start, history_start, end)
    figures = shared.get(key) if shared is not None else None
    if figures is None:
        figures = (counter.upcoming(job, schedule, at) if at is not None else [],
                   counter.count(job, "day", schedule, day_start, end),
                   counter.count(job, "all", schedule, history_start, end))
        if shared is not None:
            shared[key] = figures
    upcoming, expected_day, expected_all = figures
    missed_day = max(0, expected_day - row["seen_day"])
    missed_all = max(0, expected_all - row["seen_history"], missed_day)
    last_missed = previous.status.missed_runs.last_missed_time if missed_all and previous else None
    if missed_all:  # then the window (history_start, end] is not empty
        latest = _latest_at_or_before(schedule, end)
        if latest is not None and latest > history_start and (
            row["latest_seen"] is None or latest > row["latest_seen"]
        ):
            last_missed = _text(latest)  # the newest settled occurrence has no run
    late_since = late.since if late is not None else None
    inputs = (upcoming, missed_day, missed_all, last_missed, late_since, failing,
              *_status_values(row))
    if previous is not None and previous.inputs == inputs:
        return previous
    last_run = None
    if row["last_fire_time"] is not None:
        last_run = LastRun(
            fire_time=_text(row["last_fire_time"]),
            status=row["last_status"],
            attempt=max(1, int(row["last_attempt"])),
            claimed_by=(row["last_claimed_by"] or None) and row["last_claimed_by"][:253],
            started_at=_time(row["last_started_at"]),
            finished_at=_time(row["last_finished_at"]),
            error=redact_text(row["last_error"])[:4096] if row["last_error"] else None,
        )
    status = ObservedStatus(
        next_fire_time=upcoming[0] if upcoming else None,
        next_fire_times=upcoming,
        last_fire_time=last_run.fire_time if last_run else None,
        last_successful_time=_time(row["last_successful_time"]),
        last_run=last_run,
        active_runs=int(row["active_runs"]),
        orphaned_runs=_orphaned(int(row["orphaned_current"]), int(row["orphaned_day"])),
        failed_runs=_failed(int(row["failed_day"])),
        missed_runs=_missed(missed_day, missed_all, last_missed),
        live_agents=int(row["live_agents"]),
        late=late is not None,
        late_fire_time=_time(late_since),
        consecutive_failures=int(row["consecutive_failures"]),
        failing=failing,
        durability=row["durability"],
        tzdata_versions=list(row["agent_tzdata"]),
    )
    return Observation(job, status, int(row["exhausted_day"]), bool(row["enabled"]), inputs,
                       row["last_successful_time"])


# A status's counter parts are frozen, and most jobs' are equal (no orphans, a few failed or
# missed runs): each is built and validated once and shared, which also spares the collector
# objects to walk after a first refresh.
@lru_cache(maxsize=4096)
def _orphaned(current: int, last24h: int) -> OrphanedRuns:
    return OrphanedRuns(current=current, last24h=last24h)


@lru_cache(maxsize=4096)
def _failed(last24h: int) -> FailedRuns:
    return FailedRuns(last24h=last24h)


@lru_cache(maxsize=8192)
def _missed(last24h: int, total: int, last_missed_time: str | None) -> MissedRuns:
    return MissedRuns(last24h=last24h, total=total, last_missed_time=last_missed_time)


# The columns of the aggregate row that a status is built from (besides the counts).
_STATUS_COLUMNS = (
    "enabled", "suspend_until", "active_runs", "orphaned_current", "orphaned_day", "failed_day",
    "exhausted_day",
    "last_fire_time", "last_status", "last_attempt", "last_claimed_by", "last_started_at",
    "last_finished_at", "last_error", "last_successful_time", "live_agents",
    "consecutive_failures", "durability", "agent_tzdata",
)
_status_values = itemgetter(*_STATUS_COLUMNS)


def _late(row: Mapping[str, Any], schedule: Schedule, deadline: int | None) -> Lateness | None:
    """Whether the job is late (claimsched.schedule.deadlines): an occurrence past its grace
    (`deadline` seconds, or the schedule's default) has no run, nor any later one. Occurrences
    before the schedule became active, or while it was suspended, are never late."""
    if not row["enabled"]:
        return None
    since, until = row["active_since"], row["suspend_until"]
    active_from = since if until is None else max(since, until)
    return lateness(schedule, row["db_now"], grace(schedule, deadline), active_from,
                    row["latest_occurrence"])


def _time(t: datetime | None) -> str | None:
    return _text(t) if t is not None else None


@lru_cache(maxsize=8192)
def _text(t: datetime) -> str:
    """`rfc3339`, remembered: the jobs of one schedule share their fire times."""
    return rfc3339(t)


def refresh(
    owned: OwnedSchedules,
    schedules: Mapping[str, Schedule],
    counter: OccurrenceCounter,
    retention_days: int,
    previous: Mapping[str, Observation] | None = None,
    alerting: Mapping[str, tuple[Alerting, bool]] | None = None,
    history: SettledHistory | None = None,
) -> dict[str, Observation]:
    """Observe every job of one database with one statement; `previous` is what the last
    refresh observed (unchanged jobs keep their observation), `alerting` each job's alert
    settings and whether its resource's status said failing (default: none, and no),
    `history` this database's settled history as of the last refresh (default: counted
    afresh)."""
    if not schedules:
        return {}
    before = previous or {}
    settled = history if history is not None else SettledHistory()
    found: dict[str, Observation] = {}
    shared: dict[tuple[Any, ...], Figures] = {}
    with _collection_paused():  # the rows go before it resumes: it looks at fewer objects
        for row in owned.status_rows(settled.known(sorted(schedules)), retention_days):
            settled.complete(row)
            schedule = schedules.get(row["job_name"])
            if schedule is None:
                continue
            settings, failing = (alerting or {}).get(row["job_name"], (Alerting(), False))
            found[row["job_name"]] = observe(row, schedule, counter,
                                             before.get(row["job_name"]), settings, failing,
                                             shared)
    settled.finish()
    return found


@contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while a refresh builds its rows and observations: they
    hold no cycles, yet the collector, counting their allocations, would otherwise walk every
    object of the operator again and again. Reference counting still frees what dies. When
    the refresh kept many objects (a first one: several per job), they go straight to the
    oldest generation, where they belong: they live until the next refresh or for good, and
    the young collection that would otherwise walk them once finds nothing to free (bench/
    README.md, scenario d, has the figures). Cyclic garbage
    of other threads promoted with them waits for the next full collection, which is why a
    refresh that kept few (most: unchanged jobs keep their observation) promotes nothing."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > PROMOTED_AFTER:
            gc.freeze()  # every tracked object to the permanent generation, counts reset,
            gc.unfreeze()  # and back into the oldest one: promoted without being walked
        if paused:
            gc.enable()
