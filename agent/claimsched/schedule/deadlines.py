"""When an occurrence without a run is late: the one definition that `claimsched status`, the
web view (its squares, its verdict, its JSON) and the operator (status.late, the Late Event,
claimsched_operator_late, Ready) all use.

An occurrence *has a run* when a run row of any status holds its fire time (scheduled or
backfilled; a manual run is at the instant of its trigger, which is no occurrence). One without
a run is

* due while its grace lasts: an agent is expected to claim it any moment;
* late once its grace has passed;
* missed once it is settled (older than the catch-up window plus a lease, or after the last
  change of a schedule that is off): no agent claims it any more.

A job is late when its newest occurrence past the grace has no run, nor any later one: its
agents stopped claiming it, whatever its period (an occurrence a catch-up policy passed over,
with a later one run, does not make the job late). It is late since the oldest occurrence after
the newest one with a run.

The grace is a ClaimSchedule's spec.startingDeadlineSeconds when it has one (the operator reads
the resource; `claimsched status --late-after` sets it too); by default one period of the
schedule (its smallest gap between fires), at least GRACE_FLOOR and at most GRACE_CAP. A run
normally starts well under a second after its fire time, so the floor only absorbs a busy
replica; a period scales the wait with how often the job runs (an `@every 30s` job that
skipped a whole period is late), and the cap keeps a daily job from going unnoticed for hours:
`@every 2s` is late after 10 s, `@every 1m` after a minute, `@hourly` and `@daily` after 5 min.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Literal

from .schedules import Schedule

GRACE_FLOOR = timedelta(seconds=10)
GRACE_CAP = timedelta(minutes=5)
#: The default grace in words, for help texts and messages.
DEFAULT_GRACE = (f"one period of the schedule, {GRACE_FLOOR.seconds} s to "
                 f"{GRACE_CAP.seconds // 60} min")

Unrun = Literal["due", "late", "missed"]


def grace(schedule: Schedule | None, deadline_seconds: int | None = None) -> timedelta:
    """How long after its fire time an occurrence may still start: `deadline_seconds` when
    given, else the schedule's default (GRACE_CAP without a schedule)."""
    if deadline_seconds is not None:
        return timedelta(seconds=deadline_seconds)
    return GRACE_CAP if schedule is None else default_grace(schedule)


@lru_cache(maxsize=4096)
def default_grace(schedule: Schedule) -> timedelta:
    """One period of the schedule, at least GRACE_FLOOR, at most GRACE_CAP (equal schedules
    share the answer: a cron's period is a scan of its calendar)."""
    return min(max(schedule.period_hint, GRACE_FLOOR), GRACE_CAP)


def unrun(fire_time: datetime, now: datetime, grace: timedelta, settled: datetime) -> Unrun:
    """What an occurrence without a run is at `now`; `settled`: occurrences at or before it
    are no longer claimed."""
    if fire_time <= settled:
        return "missed"
    return "late" if fire_time <= now - grace else "due"


@dataclass(frozen=True)
class Lateness:
    """A job that is late, and by how much."""

    since: datetime  # the oldest occurrence after the newest one with a run
    due: datetime  # the newest occurrence past its grace (it has no run)
    occurrences: int  # occurrences without a run from `since` to `now`
    grace: timedelta
    now: datetime

    @property
    def age(self) -> timedelta:
        """How long ago the oldest occurrence without a run fired."""
        return self.now - self.since


def lateness(schedule: Schedule, now: datetime, grace: timedelta, active_from: datetime,
             latest_run: datetime | None) -> Lateness | None:
    """Whether the job is late at `now`, for an enabled schedule. `active_from`: occurrences at
    or before it never run (the schedule's active_since, or the end of a suspension);
    `latest_run`: the newest fire time that has a run (None: none has)."""
    due = _newest_past(schedule, grace, now)
    if due is None or due <= active_from or (latest_run is not None and latest_run >= due):
        return None
    after = active_from if latest_run is None else max(active_from, latest_run)
    since = schedule.next_after(after)
    if since is None:  # cannot be: `due` is after it
        return None
    return Lateness(since, due, schedule.count_between(after, now), grace, now)


# Most jobs of an operator's refresh share a schedule and the refresh's instant: the newest
# occurrence past the grace is found once for them all, not once per job.
@lru_cache(maxsize=8192)
def _newest_past(schedule: Schedule, grace: timedelta, now: datetime) -> datetime | None:
    return schedule.latest_at_or_before(now - grace)
