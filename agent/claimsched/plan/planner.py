"""What to claim: due occurrences per job, shaped by catch-up and concurrency policy.

The planner keeps, per job, a cursor: every occurrence at or before it is settled (claimed by
someone, recorded as skipped, or inactive). A job without a cursor (agent start, database back
after an outage, schedule changed) looks back over its catch-up window: catch-up is the same
mechanism as a normal wake-up. The database has the last word on every candidate.

A pass looks only at the jobs that may be due: a job with nothing due waits under the instant
of its next occurrence (a heap of instants), a disabled one nowhere, until its schedule entry
changes. With 100,000 schedules a pass costs what is due, not what exists.

What the planner plans from is an `Entry` per job: its `Shape` (the schedule and the settings
that decide what is due), which equal jobs share, and two instants as integers (shared too by
rows written together): a replica holds an entry per job, not a stored row with its parsed
schedule.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Iterable, Mapping, MutableMapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from weakref import WeakValueDictionary

from ..records import Candidate, ClaimResult
from ..schedule.schedules import Schedule
from ..schedule.specs import ScheduleRecord
from .turns import Turns

MAX_PER_PASS = 100
MAX_SPREAD = 16  # at most this many times the usual proposals when other replicas took most
SPREAD_UP_TO = 512  # ... and no more than this many in all (a statement's rows cost too)
CHECK_UP_TO = 4096  # occurrences checked per pass at most (a check is an index probe each)
SETTLED = frozenset({"claimed", "skipped", "taken", "inactive"})

MISSED_LATEST = "missed; catchUpPolicy Latest runs only the newest missed occurrence"
MISSED_NONE = "missed; catchUpPolicy None runs no missed occurrence"
SUPERSEDED = "superseded by a newer occurrence (concurrencyPolicy Replace)"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
T = TypeVar("T")
_TIMES_KEPT = 4096  # distinct instants (and entries) shared at most (then it starts over)


def held_once(held: dict[T, T], value: T) -> T:
    """`value`, or an equal one already in `held` (at most _TIMES_KEPT, then it starts over):
    equal values shared by many jobs are one object."""
    if len(held) >= _TIMES_KEPT:
        held.clear()
    return held.setdefault(value, value)


def micros(t: datetime) -> int:
    """An aware instant as integer microseconds since the epoch (exact, as Postgres keeps it)."""
    return (t - _EPOCH) // _MICROSECOND


def instant(us: int) -> datetime:
    """The aware UTC instant of `micros`."""
    return _EPOCH + timedelta(microseconds=us)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Shape:
    """What decides a job's due occurrences, but its name and instants: jobs with equal
    shapes share one (and its parsed schedule)."""

    schedule: Schedule
    enabled: bool
    catch_up_window_seconds: int
    concurrency_policy: str
    catch_up_policy: str
    suspend_until: datetime | None


_SHAPES: WeakValueDictionary[Shape, Shape] = WeakValueDictionary()


@dataclass(frozen=True, slots=True)
class Entry:
    """One job as the planner holds it: its shared shape, `since` (its row's active_since) and
    `updated` (its updated_at), in microseconds since the epoch."""

    shape: Shape
    since: int
    updated: int

    @classmethod
    def of(cls, record: ScheduleRecord, shared: Sharing | None = None) -> Entry:
        """The entry of a stored row; `shared` holds equal instants and equal entries of a
        read's rows once."""
        shape = Shape(record.parsed, record.enabled, record.catch_up_window_seconds,
                      record.concurrency_policy, record.catch_up_policy, record.suspend_until)
        since, updated = micros(record.active_since), micros(record.updated_at)
        if shared is None:
            return cls(_SHAPES.setdefault(shape, shape), since, updated)
        entry = cls(_SHAPES.setdefault(shape, shape), shared.instant(since),
                    shared.instant(updated))
        return shared.entry(entry)

    @property
    def active_since(self) -> datetime:
        """The schedule version the entry's fire times come from (claims name it)."""
        return instant(self.since)

    @property
    def active_from(self) -> datetime:
        """Occurrences at or before this never run (ScheduleRecord.active_from)."""
        until = self.shape.suspend_until
        return self.active_since if until is None else max(self.active_since, until)

    def same_start(self, other: Entry | None) -> bool:
        """Nothing that makes a job start afresh changed: expression, zone, active_from."""
        if other is self:
            return True
        if other is None:
            return False
        mine, theirs = self.shape.schedule, other.shape.schedule
        if (mine.expression, mine.time_zone) != (theirs.expression, theirs.time_zone):
            return False
        if self.since == other.since and self.shape.suspend_until == other.shape.suspend_until:
            return True  # without building instants (a bulk change compares 10,000s of entries)
        return self.active_from == other.active_from


@dataclass
class Sharing:
    """Equal values among a read's rows, held once: rows written by one statement have equal
    instants, and most of them equal entries then (e: 100,000 rows, ~1,500 entries). An
    entry is immutable and compared by value, so jobs can share one; a changed row gets
    another (its updated_at differs). At most _TIMES_KEPT of each (then it starts over)."""

    _instants: dict[int, int] = field(default_factory=dict)
    _entries: dict[Entry, Entry] = field(default_factory=dict)

    def instant(self, us: int) -> int:
        return held_once(self._instants, us)

    def entry(self, entry: Entry) -> Entry:
        return held_once(self._entries, entry)


@dataclass
class Planner:
    """Turns schedules and the database clock into claim candidates, and learns from outcomes."""

    misfire_grace: timedelta = timedelta(seconds=10)
    rng: random.Random = field(default_factory=random.Random)
    # Whose turn each occurrence is first (peers known: the others' wait for their hand-off).
    turns: Turns = field(default_factory=lambda: Turns(""))
    cursors: MutableMapping[str, datetime] = field(default_factory=dict)  # agent: Cursors
    truncated: bool = False
    looked_at: int = 0  # jobs the last pass looked at
    # The last pass's occurrences of jobs whose hand-off has come (another peer's turn first):
    # not proposed, but checked first (the claimer asks which of them are still unclaimed,
    # then `confirmed`): a claim of each, to learn that its first claimer took it, costs
    # every peer a row, locks and a lease's columns for nothing.
    checks: list[Candidate] = field(default_factory=list)
    # How many proposals it takes to find one free: 1 / the share of the last pass's that
    # other replicas had not taken (a herd late in its instant is mostly taken already).
    spread: float = 1.0
    # The jobs to look at: new or changed entries (`_fresh`, all of them on the next pass) and
    # those that may be due (`_queue`, in the order passes take them, as far as the quota goes;
    # `_queued` says which of its entries still count). The others wait in `_waiting` under the
    # instant of their next occurrence, or are disabled. A job that changed is looked at at
    # once and waits again under its new instant: the old one only wakes it once more.
    _fresh: set[str] = field(default_factory=set)
    _queue: deque[str] = field(default_factory=deque)
    _queued: set[str] = field(default_factory=set)
    _waiting: dict[datetime, list[str]] = field(default_factory=dict)
    # Jobs whose occurrence is another peer's turn first, under its hand-off instant; then,
    # once it has come, in `_checking` until a pass looks at them (and checks them).
    _handed: dict[datetime, list[str]] = field(default_factory=dict)
    _checking: set[str] = field(default_factory=set)
    _room: int = 0  # jobs the last pass's quota left room for (checked ones it may claim)
    _heap: list[datetime] = field(default_factory=list)  # the keys of both (an instant once each)
    _seen: Mapping[str, Entry] = field(default_factory=dict)
    _times: dict[datetime, datetime] = field(default_factory=dict)  # equal instants, shared
    _horizons: dict[int, datetime] = field(default_factory=dict)  # per catch-up window, at:
    _horizons_at: datetime | None = None

    def forget(self) -> None:
        """Start over (after an outage): every job looks back over its catch-up window."""
        self.cursors.clear()
        self._heap.clear()
        self._waiting.clear()
        self._handed.clear()
        self._checking.clear()
        self._queue.clear()
        self._queued.clear()
        self._fresh.update(self._seen)

    def _sync(self, schedules: Mapping[str, Entry]) -> None:
        """Another mapping than the last one: look at the jobs whose entry is new (a caller
        replaces the mapping, and the entries of what changed, rather than editing them); a
        job whose expression, zone or active_from changed, or that is gone, starts afresh."""
        if schedules is self._seen:
            return
        seen = self._seen
        changed = [name for name, entry in schedules.items() if seen.get(name) is not entry]
        for name in [n for n in changed if not schedules[n].same_start(seen.get(n))]:
            self.cursors.pop(name, None)
        for name in [n for n in seen if n not in schedules]:  # gone (not a set of all names)
            self.cursors.pop(name, None)
        self._fresh.update(changed)
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
        """Queue the jobs whose next occurrence has come (those whose turn it is first; the
        others wait for their hand-off, without computing anything) or whose hand-off has."""
        heap, woken = self._heap, list[str]()
        while heap and heap[0] <= now:
            when = heapq.heappop(heap)
            handed = self._handed.pop(when, ())
            self._checking.update(handed)
            woken.extend(handed)
            names = self._waiting.pop(when, None)
            if names:
                woken.extend(self._first(names, when, now))
        self._enqueue(woken)

    def _first(self, names: list[str], when: datetime, now: datetime) -> list[str]:
        """Of these jobs with an occurrence at `when`, those whose turn it is first; the
        others wait for its hand-off (turns.py). Late, every one is ours."""
        turns = self.turns
        handoff = when + turns.handoff
        if not turns.shared or now >= handoff:
            return names
        at = micros(when)
        ours = [name for name in names if turns.first(name, at)]
        if len(ours) < len(names):
            first = set(ours)
            self._hand_off([name for name in names if name not in first], handoff)
        return ours

    def _hand_off(self, names: list[str], when: datetime) -> None:
        self._park(self._handed, names, when)

    def _shared(self, when: datetime) -> datetime:
        """`when`, or an equal instant already held (daily jobs share their minutes)."""
        return held_once(self._times, when)

    def _wait_until(self, name: str, when: datetime) -> None:
        self._park(self._waiting, [name], when)

    def _park(self, under: dict[datetime, list[str]], names: list[str], when: datetime) -> None:
        """Put jobs under an instant of `_waiting` or `_handed`; the heap holds each instant
        of either once."""
        parked = under.get(when)
        if parked is None:
            when = self._shared(when)
            under[when] = parked = []
            other = self._handed if under is self._waiting else self._waiting
            if when not in other:
                heapq.heappush(self._heap, when)
        parked.extend(names)

    def plan(
        self,
        schedules: Mapping[str, Entry],
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
        so that a quiet one waits at once.
        """
        self._sync(schedules)
        self._wake(now)
        quota = None if capacity is None else round(
            max(2 * capacity, min(2 * capacity * self.spread, SPREAD_UP_TO)))
        planned: list[Candidate] = []
        self.checks = checks = []
        proposed: list[str] = []
        looked: set[str] = set()
        wanting = 0
        queue, queued, checking = self._queue, self._queued, self._checking

        def propose(name: str, job: list[Candidate]) -> None:
            nonlocal wanting
            check = name in checking  # handed off: checked first (no slot until then)
            checking.discard(name)
            if self._not_yet(name, job, now):
                return
            if check:
                checks.extend(job)
            else:
                wanting += any(c.want == "running" for c in job)
                planned.extend(job)
            proposed.append(name)

        while queue and (quota is None or wanting < quota) and len(checks) < CHECK_UP_TO:
            name = queue.popleft()
            if name not in queued:
                continue  # a stale entry
            queued.discard(name)
            looked.add(name)
            job = self._look(name, schedules, now)
            if job:
                propose(name, job)
            else:
                checking.discard(name)  # quiet, disabled or gone: nothing to check
        self.truncated = bool(queued)
        fresh = list(self._fresh)
        self._fresh = set()  # not clear(): a set keeps its largest table (the first pass's)
        self.rng.shuffle(fresh)
        later: list[str] = []
        for name in fresh:
            if name in queued or name in looked:
                continue  # its turn in the queue comes, or came
            looked.add(name)
            job = self._look(name, schedules, now)
            if not job:
                checking.discard(name)
                continue
            if (quota is not None and wanting >= quota) or len(checks) >= CHECK_UP_TO:
                self.truncated = True  # due: a later pass proposes it
                later.append(name)
            else:
                propose(name, job)
        self.looked_at = len(looked)
        self._room = len(looked) if quota is None else quota - wanting
        self._enqueue(later)
        self._enqueue(proposed, front=True)
        return planned

    def _not_yet(self, name: str, job: list[Candidate], now: datetime) -> bool:
        """Whether the job's newest occurrence is another peer's turn first, and on time: it
        then waits for its hand-off (turns.py), and is looked at again then."""
        turns = self.turns
        if not turns.shared:
            return False
        newest = job[-1].fire_time
        handoff = newest + turns.handoff
        if now >= handoff or turns.first(name, micros(newest)):
            return False
        self._hand_off([name], handoff)
        return True

    def _look(
        self, name: str, schedules: Mapping[str, Entry], now: datetime
    ) -> list[Candidate]:
        """A job's candidates now; none when it is gone, disabled or quiet (then its next
        occurrence, or a change of its entry, brings it back)."""
        entry = schedules.get(name)
        return [] if entry is None else self._plan_job(name, entry, now)

    def _plan_job(self, name: str, entry: Entry, now: datetime) -> list[Candidate]:
        shape = entry.shape
        if not shape.enabled:
            self.cursors[name] = now
            return []
        # The window bounds how far back missed occurrences are caught up; an occurrence that is
        # only a little late (inside the misfire grace) is on time, even with a window of 0.
        horizon = self._horizon(shape.catch_up_window_seconds, now)
        since = entry.active_since
        until = shape.suspend_until
        active_from = since if until is None else max(since, until)
        lower = max(self.cursors.get(name, horizon), horizon, active_from)
        due = shape.schedule.between(lower, now, limit=MAX_PER_PASS + 1)
        if not due:
            # Nothing in (lower, now]: nothing is due before the next occurrence after `lower`.
            nxt = shape.schedule.next_after(lower)
            if nxt is not None:
                self._wait_until(name, nxt)
            return []
        latest = due[-1]
        if len(due) > MAX_PER_PASS:
            # A backlog longer than one pass: settle its oldest part first (the next pass goes
            # on at once), so that no occurrence inside the window is ever passed over silently.
            due = [t for t in shape.schedule.upcoming(lower, MAX_PER_PASS) if t <= now]
        return self._candidates(name, shape, since, due, latest, now)

    def _horizon(self, window_seconds: int, now: datetime) -> datetime:
        """How far back a job with this catch-up window looks now (jobs share a few windows:
        each is computed once per `now`)."""
        if self._horizons_at != now:
            self._horizons_at, self._horizons = now, {}
        horizon = self._horizons.get(window_seconds)
        if horizon is None:
            horizon = now - max(timedelta(seconds=window_seconds), self.misfire_grace)
            self._horizons[window_seconds] = horizon
        return horizon

    def _candidates(self, name: str, shape: Shape, since: datetime, due: list[datetime],
                    latest: datetime, now: datetime) -> list[Candidate]:
        """`due` ascending (at most one pass's worth); `latest` is the newest due occurrence;
        `since` is the schedule version these fire times come from."""

        def run(t: datetime, latest: bool = True) -> Candidate:
            return Candidate(name, t, since, latest=latest)

        def skip(t: datetime, reason: str, latest: bool = False) -> Candidate:
            return Candidate(name, t, since, "skipped", reason, latest)

        older = [t for t in due if t != latest]
        newest = [latest] if due[-1] == latest else []
        if shape.concurrency_policy == "Replace":
            return [skip(t, SUPERSEDED) for t in older] + [run(t) for t in newest]
        if shape.catch_up_policy == "All":
            # Forbid: the database lets only the oldest free one run and defers the others.
            return [run(t, latest=t == latest) for t in due]
        reason = MISSED_LATEST if shape.catch_up_policy == "Latest" else MISSED_NONE
        skipped = [skip(t, reason) for t in older]
        if shape.catch_up_policy == "None" and now - latest > self.misfire_grace:
            return skipped + [skip(t, reason, latest=True) for t in newest]
        return skipped + [run(t) for t in newest]

    def learn(self, results: Iterable[ClaimResult]) -> set[str]:
        """Advance cursors over settled occurrences; returns the outcomes that blocked a job.

        A job whose every proposed occurrence settled waits at once under its next one (if
        that has come already, the next pass looks at it): no pass looks at it again to find
        out. A blocked job stays first in the queue, to be proposed again."""
        results = sorted(results, key=lambda r: (r.job_name, r.fire_time))
        free = sum(r.outcome != "taken" for r in results)
        self.spread = min(len(results) / free, MAX_SPREAD) if free else (
            MAX_SPREAD if results else 1.0)
        return self._settle(results)

    def confirmed(self, unclaimed: AbstractSet[tuple[str, datetime]]) -> list[Candidate]:
        """Of the last pass's checks, these keys are still unclaimed: returns the checked
        occurrences of their jobs, to claim now (their first claimer is busy, or gone), as
        many as the pass's quota has room for (the others stay first in the queue, proposed
        by the next pass); every other checked job is settled, and waits for its next one."""
        open_jobs = {name for name, _ in unclaimed}
        # In the pass's (per replica random) order: sorted, every replica took the same ones.
        room = set(list(dict.fromkeys(c.job_name for c in self.checks
                                      if c.job_name in open_jobs))[:max(self._room, 0)])
        claim = [c for c in self.checks if c.job_name in room]
        self._settle([ClaimResult(c.job_name, c.fire_time, "taken", None)
                      for c in self.checks if c.job_name not in open_jobs])
        self.checks = []
        return claim

    def _settle(self, results: list[ClaimResult]) -> set[str]:
        """`learn` but the spread: `results` with each job's in fire time order."""
        blocked: dict[str, str] = {}
        settled: dict[str, datetime] = {}  # job: its cursor now (not read back from cursors)
        for result in results:
            name = result.job_name
            if name in blocked:
                continue
            if result.outcome in SETTLED:
                settled[name] = self.cursors[name] = self._shared(result.fire_time)
            else:
                blocked[name] = result.outcome
        for name, cursor in settled.items():
            entry = self._seen.get(name)
            if name in blocked or entry is None or name not in self._queued:
                continue
            self._queued.discard(name)
            nxt = entry.shape.schedule.next_after(cursor)
            if nxt is not None:
                self._wait_until(name, nxt)
        return set(blocked.values())

    def next_due(
        self, schedules: Mapping[str, Entry], now: datetime
    ) -> datetime | None:
        """The earliest instant at which some job has a new occurrence."""
        self._sync(schedules)
        upcoming = self._heap[:1]
        for name in itertools.chain(self._fresh, self._queued):  # (_checking: queued too)
            entry = schedules.get(name)
            if entry is None or not entry.shape.enabled:
                continue
            after = max(self.cursors.get(name, now), entry.active_from)
            nxt = entry.shape.schedule.next_after(after)
            if nxt is not None:
                upcoming.append(nxt)
        return min(upcoming, default=None)

