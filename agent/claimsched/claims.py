"""What to claim: due occurrences per job, shaped by catch-up and concurrency policy.

The planner keeps, per job, a cursor: every occurrence at or before it is settled (claimed by
someone, recorded as skipped, or inactive). A job without a cursor (agent start, database back
after an outage, schedule changed) looks back over its catch-up window: catch-up is the same
mechanism as a normal wake-up. The database has the last word on every candidate.

A pass looks only at the jobs that may be due: a job with nothing due waits in a heap keyed by
its next occurrence, a disabled one nowhere, until its schedule entry changes. With 100,000
schedules a pass costs what is due, not what exists.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .records import Candidate, ClaimResult
from .schedules import Schedule
from .specs import ScheduleRecord

MAX_PER_PASS = 100
MAX_SPREAD = 16  # at most this many times the usual proposals when other replicas took most
SPREAD_UP_TO = 512  # ... and no more than this many in all (a statement's rows cost too)
SETTLED = frozenset({"claimed", "skipped", "taken", "inactive"})

MISSED_LATEST = "missed; catchUpPolicy Latest runs only the newest missed occurrence"
MISSED_NONE = "missed; catchUpPolicy None runs no missed occurrence"
SUPERSEDED = "superseded by a newer occurrence (concurrencyPolicy Replace)"


@dataclass
class Planner:
    """Turns schedules and the database clock into claim candidates, and learns from outcomes."""

    misfire_grace: timedelta = timedelta(seconds=10)
    rng: random.Random = field(default_factory=random.Random)
    cursors: dict[str, datetime] = field(default_factory=dict)
    truncated: bool = False
    looked_at: int = 0  # jobs the last pass looked at
    # How many proposals it takes to find one free: 1 / the share of the last pass's that
    # other replicas had not taken (a herd late in its instant is mostly taken already).
    spread: float = 1.0
    _quiet_until: dict[str, datetime] = field(default_factory=dict)
    _keys: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)
    # The jobs to look at: new or changed entries (`_fresh`, all of them on the next pass) and
    # those that may be due (`_queue`, in the order passes take them, as far as the quota goes;
    # `_queued` says which of its entries still count). The others wait in `_heap` (quiet until
    # a time; an entry is stale unless `_quiet_until` still says that time) or are disabled.
    _fresh: set[str] = field(default_factory=set)
    _queue: deque[str] = field(default_factory=deque)
    _queued: set[str] = field(default_factory=set)
    _heap: list[tuple[datetime, str]] = field(default_factory=list)
    _seen: Mapping[str, tuple[ScheduleRecord, Schedule]] = field(default_factory=dict)

    def forget(self) -> None:
        """Start over (after an outage): every job looks back over its catch-up window."""
        self.cursors.clear()
        self._quiet_until.clear()
        self._heap.clear()
        self._queue.clear()
        self._queued.clear()
        self._fresh.update(self._seen)

    def _sync(self, schedules: Mapping[str, tuple[ScheduleRecord, Schedule]]) -> None:
        """Another mapping than the last one: look at the jobs whose entry is new (a caller
        replaces the mapping, and the entries of what changed, rather than editing them)."""
        if schedules is self._seen:
            return
        seen = self._seen
        self._fresh.update(name for name, entry in schedules.items() if seen.get(name) is not entry)
        self._seen = schedules

    def _enqueue(self, names: list[str], front: bool = False) -> None:
        """Queue these jobs in random order (replicas then take different ones first)."""
        names = [name for name in names if name not in self._queued]
        self.rng.shuffle(names)
        self._queued.update(names)
        if front:
            self._queue.extendleft(names)
        else:
            self._queue.extend(names)

    def _wake(self, now: datetime) -> None:
        """Queue the jobs whose quiet time has come."""
        heap, woken = self._heap, []
        while heap and heap[0][0] <= now:
            when, name = heapq.heappop(heap)
            if self._quiet_until.get(name) == when:
                woken.append(name)
        self._enqueue(woken)
        if len(heap) > 2 * len(self._quiet_until) + 1024:  # stale entries of changed jobs
            self._heap = [(when, name) for when, name in heap
                          if self._quiet_until.get(name) == when]
            heapq.heapify(self._heap)

    def _quiet_until_at(self, name: str, when: datetime) -> None:
        self._quiet_until[name] = when
        heapq.heappush(self._heap, (when, name))

    def plan(
        self,
        schedules: Mapping[str, tuple[ScheduleRecord, Schedule]],
        now: datetime,
        capacity: int | None = None,
    ) -> list[Candidate]:
        """Candidates for due jobs, in random order, each job's occurrences ascending.

        With `capacity`, jobs wanting a run are proposed for about twice the free slots only
        (times `spread`: more when other replicas took most of the last ones), and planning
        stops there: a pass costs O(slots), not O(due jobs), in Python as in the
        database. `truncated` then says that some job not proposed may be due. The jobs a pass
        proposed are looked at first by the next one (to see them settled, or propose them
        again); then the queue, whose order is random per replica, so replicas spread. Past the
        quota, a job seen for the first time (or changed) is still classified, due or quiet,
        so that a quiet one goes to the heap at once.
        """
        self._sync(schedules)
        self._wake(now)
        quota = None if capacity is None else round(
            max(2 * capacity, min(2 * capacity * self.spread, SPREAD_UP_TO)))
        planned: list[Candidate] = []
        proposed: list[str] = []
        looked: set[str] = set()
        wanting = 0
        queue, queued = self._queue, self._queued
        while queue and (quota is None or wanting < quota):
            name = queue.popleft()
            if name not in queued:
                continue  # a stale entry
            queued.discard(name)
            looked.add(name)
            job = self._look(name, schedules, now)
            if job:
                wanting += any(c.want == "running" for c in job)
                planned.extend(job)
                proposed.append(name)
        self.truncated = bool(queued)
        fresh = list(self._fresh)
        self._fresh.clear()
        self.rng.shuffle(fresh)
        later: list[str] = []
        for name in fresh:
            if name in queued or name in looked:
                continue  # its turn in the queue comes, or came
            looked.add(name)
            job = self._look(name, schedules, now)
            if not job:
                continue
            if quota is not None and wanting >= quota:
                self.truncated = True  # due: a later pass proposes it
                later.append(name)
            else:
                wanting += any(c.want == "running" for c in job)
                planned.extend(job)
                proposed.append(name)
        self.looked_at = len(looked)
        self._enqueue(later)
        self._enqueue(proposed, front=True)
        return planned

    def _look(
        self, name: str, schedules: Mapping[str, tuple[ScheduleRecord, Schedule]], now: datetime
    ) -> list[Candidate]:
        """A job's candidates now; none when it is gone, disabled or quiet (then its heap
        entry, or a change of its entry, brings it back)."""
        entry = schedules.get(name)
        if entry is None:
            return []
        record, schedule = entry
        if self._quiet(name, record, now):
            return []
        return self._plan_job(record, schedule, now)

    def _quiet(self, name: str, record: ScheduleRecord, now: datetime) -> bool:
        """Known to have nothing due before a later instant (and unchanged since)."""
        quiet = self._quiet_until.get(name)
        return quiet is not None and quiet > now and self._keys.get(name) == _key(record)

    def _plan_job(
        self, record: ScheduleRecord, schedule: Schedule, now: datetime
    ) -> list[Candidate]:
        key = _key(record)
        if self._keys.get(record.job_name) != key:
            self._keys[record.job_name] = key
            self.cursors.pop(record.job_name, None)
            self._quiet_until.pop(record.job_name, None)
        if not record.enabled:
            self.cursors[record.job_name] = now
            return []
        # The window bounds how far back missed occurrences are caught up; an occurrence that is
        # only a little late (inside the misfire grace) is on time, even with a window of 0.
        horizon = now - max(timedelta(seconds=record.catch_up_window_seconds), self.misfire_grace)
        lower = max(self.cursors.get(record.job_name, horizon), horizon, record.active_from)
        due = schedule.between(lower, now, limit=MAX_PER_PASS + 1)
        if not due:
            # Nothing in (lower, now]: nothing is due before the next occurrence after `lower`.
            nxt = schedule.next_after(lower)
            if nxt is not None:
                self._quiet_until_at(record.job_name, nxt)
            return []
        latest = due[-1]
        if len(due) > MAX_PER_PASS:
            # A backlog longer than one pass: settle its oldest part first (the next pass goes
            # on at once), so that no occurrence inside the window is ever passed over silently.
            due = [t for t in schedule.upcoming(lower, MAX_PER_PASS) if t <= now]
        return self._candidates(record, due, latest, now)

    def _candidates(
        self, record: ScheduleRecord, due: list[datetime], latest: datetime, now: datetime
    ) -> list[Candidate]:
        """`due` ascending (at most one pass's worth); `latest` is the newest due occurrence."""
        since = record.active_since  # the schedule version these fire times come from

        def run(t: datetime, latest: bool = True) -> Candidate:
            return Candidate(record.job_name, t, since, latest=latest)

        def skip(t: datetime, reason: str, latest: bool = False) -> Candidate:
            return Candidate(record.job_name, t, since, "skipped", reason, latest)

        older = [t for t in due if t != latest]
        newest = [latest] if due[-1] == latest else []
        if record.concurrency_policy == "Replace":
            return [skip(t, SUPERSEDED) for t in older] + [run(t) for t in newest]
        if record.catch_up_policy == "All":
            # Forbid: the database lets only the oldest free one run and defers the others.
            return [run(t, latest=t == latest) for t in due]
        reason = MISSED_LATEST if record.catch_up_policy == "Latest" else MISSED_NONE
        skipped = [skip(t, reason) for t in older]
        if record.catch_up_policy == "None" and now - latest > self.misfire_grace:
            return skipped + [skip(t, reason, latest=True) for t in newest]
        return skipped + [run(t) for t in newest]

    def learn(self, results: Iterable[ClaimResult]) -> set[str]:
        """Advance cursors over settled occurrences; returns the outcomes that blocked a job."""
        blocked: dict[str, str] = {}
        results = sorted(results, key=lambda r: (r.job_name, r.fire_time))
        free = sum(r.outcome != "taken" for r in results)
        self.spread = min(len(results) / free, MAX_SPREAD) if free else (
            MAX_SPREAD if results else 1.0)
        for result in results:
            if result.job_name in blocked:
                continue
            if result.outcome in SETTLED:
                self.cursors[result.job_name] = result.fire_time
            else:
                blocked[result.job_name] = result.outcome
        return set(blocked.values())

    def next_due(
        self, schedules: Mapping[str, tuple[ScheduleRecord, Schedule]], now: datetime
    ) -> datetime | None:
        """The earliest instant at which some job has a new occurrence."""
        self._sync(schedules)
        heap = self._heap
        while heap and self._quiet_until.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        upcoming = [heap[0][0]] if heap else []
        for name in itertools.chain(self._fresh, self._queued):
            entry = schedules.get(name)
            if entry is None:
                continue
            record, schedule = entry
            if not record.enabled:
                continue
            nxt = self._quiet_until.get(name)
            if nxt is None or self._keys.get(name) != _key(record):
                after = max(self.cursors.get(name, now), record.active_from)
                nxt = schedule.next_after(after)
            if nxt is not None:
                upcoming.append(nxt)
        return min(upcoming, default=None)


def _key(record: ScheduleRecord) -> tuple[str, str, datetime]:
    """What, when changed, makes a job start afresh."""
    return (record.schedule, record.time_zone, record.active_from)
