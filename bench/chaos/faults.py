"""A storm's faults: what the plan says (Fault), the replica positions they hold (Slot), what
they did (Event), and the lanes that keep them apart.

A lane is one target's timeline (a replica's, "postgres", a frozen job's). A fault that stops,
pauses or cuts off a replica reserves a replica lane from its start until `until`: its duration
and the slack its replica needs to be itself again. Reservations of one lane never overlap, and
at any instant one replica lane at least is free, unless a fault of the whole fleet (target
FLEET) reserves every lane.

The plan names replica lanes after the slots (r0, r1, ...) and each lane starts on its slot;
`Lanes` keeps which slot each lane is on now. A fault that picks its replica only when it runs
(the one that holds a run of some kind at that moment) may take any replica that no fault holds
and whose lane is idle at that moment: the two lanes swap slots, from then on. A swap is a
permutation of lanes, never of reservations: every replica still has one fault at a time, and
as many replicas are faulted at any instant as the plan said.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..ha.blackhole import Blackhole
from ..releases import Release
from .harness import Replica

FLEET = "fleet"  # the target of a fault of every replica at once
GRACE = 2.0  # CLAIMSCHED_SHUTDOWN_GRACE_SECONDS of the replicas
STARTUP = 3.0  # seconds a restarted replica may take before it claims again (planning slack)


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the fault phase started
    kind: str
    target: str  # replica slot, FLEET, "postgres", a job, or the skewed slot
    duration: float  # downtime, pause, outage; for skew: 0
    # skew: the new offset in seconds; new_id: 1 = SIGTERM, 0 = SIGKILL; the others: see their
    # planning (plan.plan_faults, recovery.plan_recovery)
    value: float = 0.0
    until: float = 0.0  # the end of its reservation of its target's lane (0: it reserves none)
    job: str = ""  # the job it works on, when its target is a replica


@dataclass
class Slot:
    """One replica position: its current agent id, process, and whether a fault holds it."""

    name: str
    agent_id: str
    skew_file: Path | None
    replica: Replica | None = None
    incarnation: int = 0
    held: bool = False  # a fault (or the harness) owns this slot's process right now
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: list[str] = field(default_factory=list)
    proxies: list[Blackhole] = field(default_factory=list)  # partition faults cut these
    dsn: str | None = None  # through `proxies`, when the storm has partition faults
    release: Release | None = None  # an earlier release's agent runs here (until its upgrade)


@dataclass
class Event:
    at: float  # seconds after the fault phase started
    kind: str
    target: str
    detail: str = ""
    end: float | None = None
    # False: the fault found nothing to act on (no run of the kind it waits for came in time),
    # so it did not happen; the report counts it apart (`faults_missed`)
    happened: bool = True


class Lanes:
    """Which slot each replica lane is on now (a permutation of the slots; at first each
    lane is on its own)."""

    def __init__(self, faults: Iterable[Fault], slots: dict[str, Slot]) -> None:
        self.faults = list(faults)
        self.slots = slots
        self._on = {name: name for name in slots}  # lane -> slot name
        self._lock = threading.Lock()

    def slot(self, lane: str) -> Slot:
        with self._lock:
            return self.slots[self._on[lane]]

    @contextmanager
    def holding(self, lane: str) -> Iterator[Slot]:
        """The slot `lane` is on, held (locked, `held`) until the block ends; waits for a
        fault that holds it now, and follows a swap that came meanwhile."""
        while True:
            slot = self.slot(lane)
            slot.lock.acquire()
            if self.slot(lane) is slot:
                break
            slot.lock.release()
        slot.held = True
        try:
            yield slot
        finally:
            slot.held = False
            slot.lock.release()

    def take(self, lane: str, slot: Slot, now: float) -> bool:
        """Hold `slot` for the fault of `lane` (reserved now), if no fault holds it and its
        own lane is idle now: the two lanes swap slots. Release it with `give`."""
        with self._lock:
            if not slot.lock.acquire(blocking=False):
                return False
            theirs = next(name for name, on in self._on.items() if on == slot.name)
            if slot.held or not (theirs == lane or self._idle(theirs, now)):
                slot.lock.release()
                return False
            self._on[theirs], self._on[lane] = self._on[lane], slot.name
            slot.held = True
            return True

    @staticmethod
    def give(slot: Slot) -> None:
        slot.held = False
        slot.lock.release()

    def _idle(self, lane: str, now: float) -> bool:
        """Whether no fault reserves `lane` at `now`."""
        return not any(
            f.at <= now < f.until for f in self.faults if f.target in (lane, FLEET)
        )
