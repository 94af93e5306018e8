"""Housekeeping: presence, the reaper and max_runtime, in one cheap statement per period (and
when a lease of another agent's run ends); and the memory the period freed goes back to the OS."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import memory, metrics
from ..clock import DbClock
from ..errors import DatabaseError
from ..health import DatabaseHealth
from ..logs import AgentLog
from ..plan.turns import Turns
from ..records import Housekeeping
from ..schedule.zones import tzdata_version
from ..version import __version__
from .signals import Signals, margin
from .supervisor import Supervisor


def presence(period: float) -> dict[str, Any]:
    """What this agent says about itself in the presence table; alive for three periods."""
    return {
        "hostname": socket.gethostname(),
        "pod": os.environ.get("POD_NAME"),
        "namespace": os.environ.get("POD_NAMESPACE"),
        "version": __version__,
        "ttl_seconds": max(3, int(period * 3)),
        "tzdata": tzdata_version(),
    }


class Sweeps(Protocol):
    """Sends the one housekeeping statement in this agent's name."""

    def housekeeping(self, listed: bool) -> Housekeeping:
        """With the agent's job list when `listed`, else without."""
        ...


@dataclass
class Housekeeper:
    """Keeps this agent's presence row fresh and reaps expired leases (any replica may).

    `sweeps.housekeeping(listed)` sends the one housekeeping statement, with the agent's job
    list when `listed` (the first time, and again at once whenever the row turned out not to
    hold it: deleted, or a database that never had it), else without (the row keeps it: with
    100,000 jobs the list is megabytes). It signals `reaped` when runs were fenced out (the
    heartbeat should look at once) and `claimable` when runs want an owner, and tells `turns`
    the live agents that have the same jobs, every time.

    It sweeps every `period` seconds, and earlier so that an orphan is reaped within about a
    heartbeat of its lease's end, whatever the period:
    - right after the end of the next lease another agent holds on a run of its jobs (the
      sweep says which: `next_expiry`). A gone owner renewed nothing: the sweep reaps its run,
      and its NOTIFY has every agent reclaim at once. A live owner renewed it, at least once a
      heartbeat: the sweep then finds every live lease ending at least lease - heartbeat later,
      so leases that get renewed wake it at most once per lease - heartbeat, however many runs
      are in flight.
    - by the deadline of the `look_within(seconds)` signal: other replicas may have started
      runs of its jobs since its last sweep (it has not seen their leases yet), `seconds` being
      no more than their lease: a sweep then either reaps such a run whose owner died at once,
      or learns its lease's end.
    The wait for a lease's end is measured from the sweep's own reading of the database's clock
    (its `db_now`), from when the answer arrived: it never ends before the lease by the
    database's clock (an offset estimate may be ahead by half a round trip; a sweep before the
    end would find the lease still running and reap nothing).
    """

    sweeps: Sweeps
    period: float
    clock: DbClock
    log: AgentLog
    health: DatabaseHealth
    signals: Signals
    turns: Turns
    _listed: bool = field(init=False, default=False)  # the row holds this agent's job list
    _unlisted_said: bool = field(init=False, default=False)  # warned that it stays unlisted
    # When to sweep (time.monotonic()): the last sweep began at `_swept_at`; `_expiry` is just
    # after the next lease's end it found, the signals' `look_by` the deadline `look_within`
    # set; a failed sweep is tried again early no sooner than `_retry_at`. `_asked`: `wake()`
    # wants a sweep now.
    _swept_at: float = field(init=False, default_factory=time.monotonic)
    _expiry: float | None = field(init=False, default=None)
    _retry_at: float | None = field(init=False, default=None)
    _asked: bool = field(init=False, default=False)

    @property
    def listed(self) -> bool:
        """Whether this agent's row held its job list at the last sweep."""
        return self._listed

    def once(self) -> None:
        listed = self._listed
        self._sweep(listed=not listed)
        if listed and not self._listed:  # the row lost the list: again, with it
            self._sweep(listed=True)
        if not self._listed and not self._unlisted_said:  # sent, and still not kept
            self._unlisted_said = True
            self.log.warning(
                "the database keeps no job list for this agent: its agent id belongs to another "
                "database login, or none of its jobs is in its role's scope (claimsched roles); "
                "peers and runs that want an owner go by what it sends each time",
                extra={"action": "presence_refused"})

    def _sweep(self, listed: bool) -> None:
        told = self.signals.told()
        self._swept_at = sent = time.monotonic()
        found = self.sweeps.housekeeping(listed)
        arrived = time.monotonic()
        self._listed = found.present
        self.turns.seen(found.peers)
        self.clock.observe(found.db_now, sent, arrived)
        self._expiry = None if found.next_expiry is None else (
            arrived + (found.next_expiry - found.db_now).total_seconds() + margin())
        self.signals.looked(told)
        if found.orphaned or found.exhausted or found.overdue:
            metrics.ORPHANS_REAPED.inc(found.orphaned)
            self.log.info(
                "reaper: %d orphaned, %d out of attempts, %d past max_runtime",
                found.orphaned,
                found.exhausted,
                found.overdue,
                extra={"action": "reap"},
            )
            self.signals.reaped()
        if found.claimable:
            self.signals.claimable()

    def start(self, supervisor: Supervisor) -> None:
        """Start the housekeeping loop on a watched thread of its own."""
        supervisor.spawn("claimsched-housekeeping", self.loop)

    def stop(self) -> None:
        """Wake the loop so that it sees the agent stopping."""
        self.wake()

    def wake(self) -> None:
        """Sweep now (an agent came or went: the peers changed), or see that it stops."""
        self._asked = True
        self.signals.sweep.set()

    def due(self) -> float:
        """When the next sweep is due (time.monotonic())."""
        due = self._swept_at + self.period
        early = [at for at in (self._expiry, self.signals.look_by) if at is not None]
        if early:
            due = min(due, max(min(early), self._retry_at or 0.0))
        return due

    def loop(self) -> None:
        wake, stopping = self.signals.sweep, self.signals.stopping
        while True:
            wake.wait(max(0.0, self.due() - time.monotonic()))
            wake.clear()
            if stopping.is_set():
                return
            if not self._asked and time.monotonic() < self.due():
                continue  # woken for an earlier deadline: wait for it
            self._asked = False
            try:
                self.once()
                self.health.succeeded()
                self._retry_at = None
            except DatabaseError as exc:
                self._retry_at = time.monotonic() + self.health.failed(exc)
            # What reads and planner passes freed goes back to the OS (a cheap call).
            memory.release_freed()
