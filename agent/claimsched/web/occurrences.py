"""What became of each occurrence: the runs the database holds, and the expected fire times
that have no run (due, late or missed), in one ascending list.

Classes, one colour each on the pages:

* done, failed, skipped, running: the run's status (its final outcome, however many attempts
  it took);
* waiting: a run that wants an owner (pending manual or backfill, or orphaned right now);
* due, late, missed: an expected occurrence with no run, inside its grace, past it, or too old
  to be claimed now (older than the catch-up window plus a lease, as the operator counts it;
  every one, once the schedule is off): claimsched.schedule.deadlines decides which.

Expected occurrences start after `active_since` (what came before never runs) and, for a
schedule that is off, end at its last change. A run of any kind at the same fire time covers
an expected occurrence (one row per occurrence: UNIQUE (job_name, fire_time)).

Apart from its class, an occurrence is *retried* when its run needed more than one attempt
(attempt > 1) or lost its lease on the way (orphan_count > 0): the pages mark its square, and
its run names who held each attempt (`Run.owners`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from ..schedule.deadlines import unrun
from ..schedule.schedules import Schedule

Class = Literal["done", "failed", "skipped", "running", "waiting", "missed", "late", "due"]
CLASSES: tuple[Class, ...] = (
    "done", "failed", "skipped", "missed", "late", "running", "waiting", "due")
MEANING: dict[Class, str] = {
    "done": "done",
    "failed": "failed",
    "skipped": "skipped (catch-up or concurrency policy)",
    "missed": "missed: no run, and none will be claimed now",
    "late": "late: no run past its grace; an agent may still claim it",
    "running": "running",
    "waiting": "waiting for an owner (requested or orphaned)",
    "due": "due: no run yet, inside its grace",
}
RETRIED = "needed more than one attempt (orphaned, fenced out or retried)"


_BY_STATUS: dict[str, Class] = {"done": "done", "failed": "failed", "skipped": "skipped",
                                 "running": "running", "pending": "waiting", "orphaned": "waiting"}


@dataclass(frozen=True)
class Run:
    """A run row as the pages show it (the overview reads only the first fields)."""

    id: int
    fire_time: datetime
    status: str
    attempt: int = 1
    orphan_count: int = 0
    kind: str = "scheduled"
    claimed_by: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    earlier_owners: tuple[str | None, ...] = ()  # of the superseded attempts, oldest first

    @property
    def retried(self) -> bool:
        """Whether it needed more than one attempt or lost its lease on the way."""
        return self.attempt > 1 or self.orphan_count > 0

    @property
    def owners(self) -> list[str | None]:
        """Who held each attempt, the first one first and the run's own owner last; None
        for an attempt nobody kept a record of (history from before job_attempts, or an
        attempt without an owner). Empty while no attempt has begun (a pending request)."""
        if self.attempt < 1:
            return []
        earlier = list(self.earlier_owners[-(self.attempt - 1):]) if self.attempt > 1 else []
        return [None] * (self.attempt - 1 - len(earlier)) + earlier + [self.claimed_by]


@dataclass(frozen=True)
class Occurrence:
    fire_time: datetime
    cls: Class
    run: Run | None = None

    @property
    def retried(self) -> bool:
        return self.run is not None and self.run.retried


@dataclass(frozen=True)
class Window:
    """Which expected occurrences count, for one schedule at one instant (the database's)."""

    active_since: datetime
    enabled: bool
    updated_at: datetime
    settle_seconds: int  # catch-up window + lease: older expected occurrences are missed
    now: datetime
    grace: timedelta  # older expected occurrences without a run are late (deadlines.grace)

    @property
    def end(self) -> datetime:
        return self.now if self.enabled else min(self.updated_at, self.now)

    @property
    def settled(self) -> datetime:
        return self.now - timedelta(seconds=self.settle_seconds) if self.enabled else self.end


def classify(run: Run) -> Class:
    """The class of an occurrence that has a run: its status, whatever its attempts."""
    return _BY_STATUS.get(run.status, "waiting")


def occurrences(
    schedule: Schedule | None,
    runs: Sequence[Run],
    window: Window,
    limit: int,
    since: datetime | None = None,
) -> list[Occurrence]:
    """The newest `limit` occurrences (after `since`, if given), ascending by fire time.

    `runs` must be the newest `limit` runs of the job (after `since`), or all of them: an
    expected occurrence older than all of those is never among the newest `limit` anyway."""
    found = {run.fire_time: Occurrence(run.fire_time, classify(run), run) for run in runs}
    if schedule is not None:
        start = max(window.active_since, since) if since else window.active_since
        for fire in schedule.between(start, window.end, limit=limit):
            if fire not in found:
                found[fire] = Occurrence(fire, unrun(fire, window.now, window.grace,
                                                     window.settled))
    return sorted(found.values(), key=lambda o: o.fire_time)[-limit:]


def counts(items: Sequence[Occurrence]) -> dict[str, int]:
    """How many occurrences of each class (every class, zero included)."""
    found: dict[str, int] = dict.fromkeys(CLASSES, 0)
    for item in items:
        found[item.cls] += 1
    return found


def retried(items: Sequence[Occurrence]) -> int:
    """How many occurrences needed more than one attempt (whatever their class)."""
    return sum(item.retried for item in items)


@dataclass(frozen=True)
class Fire:
    """An upcoming fire time, and the clock change on its local day, if any."""

    at: datetime
    local: datetime
    clock_change: str | None  # e.g. "clocks go forward 1 h" on a DST transition day


def next_fires(schedule: Schedule, now: datetime, count: int) -> list[Fire]:
    zone = ZoneInfo(schedule.time_zone)
    fires = []
    for at in schedule.upcoming(now, count):
        local = at.astimezone(zone)
        fires.append(Fire(at, local, clock_change(zone, local.date())))
    return fires


def clock_change(zone: ZoneInfo, day: date) -> str | None:
    """What the clock does on this local day: None on a steady day."""
    start = datetime.combine(day, time(), zone).utcoffset()
    end = datetime.combine(day + timedelta(days=1), time(), zone).utcoffset()
    if start is None or end is None or start == end:
        return None
    shift = abs(end - start)
    hours = shift.total_seconds() / 3600
    amount = f"{hours:g} h" if hours >= 1 else f"{shift.total_seconds() / 60:g} min"
    return f"clocks go {'forward' if end > start else 'back'} {amount}"
