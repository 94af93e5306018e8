"""Signals: what the run services tell one another, in one typed object per agent.

A service emits a signal by calling its method here; the service it is meant for waits on its
event and reads what came with it. No service holds another's method to call back, so each is
made before the others and given this object, and a reader (or a call graph) follows a signal
by its name. Each signal is also a `TestSignal` that a test may wait on.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from ..clock import DbClock
from ..records import Lease

T = TypeVar("T")

#: Seconds after a lease's end (by the database's clock) that the sweep for it comes, and at
#: most how much later still, at random: the replicas that wake for one lease do not all reap
#: at once. Both well under a heartbeat (1 s at least), which bounds how late a reap may be.
EXPIRY_MARGIN = 0.05
EXPIRY_SPREAD = 0.2


def margin() -> float:
    """How long after a lease's end a sweep for it comes: EXPIRY_MARGIN plus a random spread."""
    return EXPIRY_MARGIN + random.uniform(0, EXPIRY_SPREAD)


class TestSignal(Generic[T]):
    """A signal a test waits on (River's testsignal): it keeps nothing until `init()`, which
    only tests call."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self._heard: queue.Queue[T] | None = None
        self.count = 0  # the values signalled since `init()`

    def init(self) -> None:
        self._heard = queue.Queue()

    def note(self, value: T) -> None:
        if self._heard is not None:
            self.count += 1
            self._heard.put(value)

    def wait(self, timeout: float = 10.0) -> T:
        """The next value signalled (since `init()`); AssertionError if none comes in time."""
        assert self._heard is not None, "init() the test signal before waiting on it"
        try:
            return self._heard.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no signal within {timeout} s") from None

    def rest(self) -> list[T]:
        """The values signalled and not waited for yet (and now taken)."""
        assert self._heard is not None, "init() the test signal before reading it"
        taken: list[T] = []
        while not self._heard.empty():
            taken.append(self._heard.get_nowait())
        return taken


@dataclass
class TestSignals:
    """Every signal, as tests may wait on it."""

    __test__ = False  # not a pytest class

    slot_freed: TestSignal[None] = field(default_factory=TestSignal)
    retry_at: TestSignal[datetime] = field(default_factory=TestSignal)
    run_ended: TestSignal[Lease] = field(default_factory=TestSignal)
    claimable: TestSignal[None] = field(default_factory=TestSignal)
    recovered: TestSignal[None] = field(default_factory=TestSignal)
    reaped: TestSignal[None] = field(default_factory=TestSignal)
    look_within: TestSignal[float] = field(default_factory=TestSignal)

    def init(self) -> None:
        """Keep every signal from now on, for a test to wait on."""
        for each in (self.slot_freed, self.retry_at, self.run_ended, self.claimable,
                     self.recovered, self.reaped, self.look_within):
            each.init()


@dataclass
class Signals:
    """The signals between the claim loop, the workers, the heartbeat and the housekeeper.

    For the claim loop (it wakes on `wake`): `slot_freed` (a run ended or was lost),
    `retry_at` (a failed run will want an owner then), `run_ended` (its completion was
    answered), `claimable` (runs want an owner), `recovered` (the database is back, or another
    one). For the heartbeat (it wakes on `kick`): `reaped` (runs were fenced out: renew now).
    For the housekeeper (it wakes on `sweep`): `look_within` (other replicas may have started
    runs of these jobs). `stopping` is set when the agent stops: every service ends.
    """

    clock: DbClock
    stopping: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)  # the claim loop's
    kick: threading.Event = field(default_factory=threading.Event)  # the heartbeat's
    sweep: threading.Event = field(default_factory=threading.Event)  # the housekeeper's
    test: TestSignals = field(default_factory=TestSignals)
    # The claim loop's news: look for runs that want an owner; look back over the catch-up
    # windows; the monotonic time a failed run wants an owner again; the last pass left work
    # for want of a slot (or is still running), so a freed slot wakes it.
    reclaim: bool = field(init=False, default=True)
    catch_up: bool = field(init=False, default=False)
    next_retry: float | None = field(init=False, default=None)
    starved: bool = field(init=False, default=True)
    # The shortest lease of the schedules the claim loop read: the housekeeper looks at runs
    # other replicas may have started before such a lease can end.
    shortest_lease: float | None = field(init=False, default=None)
    # Runs a reclaim started that may have left work behind: their end looks again.
    _follow: set[tuple[int, int]] = field(init=False, default_factory=set)  # (id, attempt)
    _follow_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    # The housekeeper's deadline (time.monotonic()) from `look_within`, and how many times it
    # was told (a sweep sent after the last call clears the deadline: `looked`).
    look_by: float | None = field(init=False, default=None)
    _told: int = field(init=False, default=0)
    _look_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    # -- for the claim loop --------------------------------------------------------------------

    def slot_freed(self) -> None:
        """A run ended or was lost: wake the loop if it is waiting for a slot. Otherwise a
        freed slot changes nothing it would do (each wake-up is a planner pass)."""
        self.test.slot_freed.note(None)
        if self.starved:
            self.wake.set()

    def retry_at(self, when: datetime) -> None:
        """A failed run will want an owner at `when`: wake up then to reclaim it."""
        self.test.retry_at.note(when)
        at = time.monotonic() + max(0.0, self.clock.seconds_until(when))
        self.next_retry = at if self.next_retry is None else min(self.next_retry, at)
        self.wake.set()

    def follow(self, lease: Lease) -> None:
        """A reclaim started this run and may have left work behind: its end looks again
        (`run_ended`). Said before the run starts: it may end at once."""
        with self._follow_lock:
            self._follow.add((lease.id, lease.attempt))

    def run_ended(self, lease: Lease) -> None:
        """A run ended and its outcome was recorded (so its Forbid job is no longer busy): if a
        reclaim started it and may have left work behind, look for that work now."""
        with self._follow_lock:
            followed = (lease.id, lease.attempt) in self._follow
            self._follow.discard((lease.id, lease.attempt))
        if followed:
            self.claimable()
        self.test.run_ended.note(lease)

    def claimable(self) -> None:
        """Runs may want an owner (orphans, requests, retries): look on the next pass, now.
        Another replica may take them first."""
        self.test.claimable.note(None)
        self.reclaim = True
        self.others_may_run()
        self.wake.set()

    def recovered(self) -> None:
        """The database is back (or another one): look back over every catch-up window."""
        self.test.recovered.note(None)
        self.catch_up = True
        self.reclaim = True
        self.wake.set()

    # -- for the heartbeat ---------------------------------------------------------------------

    def reaped(self) -> None:
        """Runs were fenced out: the heartbeat renews (and finds lost leases) now."""
        self.test.reaped.note(None)
        self.kick.set()

    # -- for the housekeeper -------------------------------------------------------------------

    def others_may_run(self) -> None:
        """Another replica may have started runs of these jobs: the housekeeper looks at them
        before the shortest of their leases can end."""
        if self.shortest_lease is not None:
            self.look_within(self.shortest_lease)

    def look_within(self, seconds: float) -> None:
        """Other replicas may have started runs of this agent's jobs (or are about to), whose
        leases last at least `seconds`: the housekeeper sweeps no later than that from now.
        Told again before it swept, it keeps the earlier deadline: one sweep per lease at most,
        however many runs start."""
        self.test.look_within.note(seconds)
        at = time.monotonic() + seconds + margin()
        with self._look_lock:
            self._told += 1
            if self.look_by is None or at < self.look_by:
                self.look_by = at
                self.sweep.set()  # the housekeeper waits for the new deadline

    def told(self) -> int:
        """How many times `look_within` was called so far (a sweep notes it before it goes)."""
        return self._told

    def looked(self, told: int) -> None:
        """A sweep sent when `told()` answered `told` has been answered: unless told again
        since, the deadline is met."""
        with self._look_lock:
            if self._told == told:
                self.look_by = None
