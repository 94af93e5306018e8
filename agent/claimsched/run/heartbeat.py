"""The heartbeat: renews all of this agent's leases in one statement, and notices lost ones."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from .. import metrics
from ..errors import DatabaseError
from ..health import DatabaseHealth
from ..records import Lease
from .signals import Signals
from .supervisor import Supervisor
from .workers import Workers

IDLE_WAIT = 1.0


class Renewals(Protocol):
    """Renews this agent's leases in one statement."""

    def heartbeat(self, leases: Sequence[Lease]) -> set[int]:
        """Returns the ids of the runs still owned."""
        ...


class Heartbeat:
    """Renews leases when the first one is due; a run whose row it no longer owns is lost.

    `renewals` sends the one heartbeat statement and returns the ids of the runs still owned;
    the `reaped` signal (its `kick`) has it renew at once.
    After a failed renewal the next one waits the health's backoff, so a database that answers
    errors quickly is not hammered. `watch` is the lease watchdog, on a thread of its own: a run
    whose last confirmed renewal plus its lease has passed is lost at that instant, by the local
    monotonic clock, without asking the database (a renewal may hang behind a partition).
    """

    def __init__(
        self,
        renewals: Renewals,
        workers: Workers,
        health: DatabaseHealth,
        signals: Signals,
    ) -> None:
        self._renewals = renewals
        self._workers = workers
        self._health = health
        self._signals = signals
        self._kick = signals.kick
        self._retry_at: float | None = None  # after a failed renewal: when to try again

    def start(self, supervisor: Supervisor) -> None:
        """Start the renewals and the watchdog, each on a watched thread of its own."""
        supervisor.spawn("claimsched-heartbeat", self.loop)
        supervisor.spawn("claimsched-watchdog", self.watch)

    def stop(self) -> None:
        """Wake the renewals so that they see the agent stopping (the watchdog wakes by it)."""
        self.kick()

    def kick(self) -> None:
        """Renew (and check for lost leases) now: something may have fenced us out."""
        self._kick.set()

    def loop(self) -> None:
        stopping = self._signals.stopping
        while not stopping.is_set():
            slots = self._workers.slots()
            if not slots:
                self._kick.wait(IDLE_WAIT)
                self._kick.clear()
                continue
            renew_at = self._retry_at or min(
                s.renewed_at + s.run.lease.heartbeat_seconds for s in slots
            )
            kicked = self._kick.wait(max(0.0, renew_at - time.monotonic()))
            self._kick.clear()
            if stopping.is_set():
                return
            if kicked or time.monotonic() >= renew_at:
                self.renew()

    def watch(self) -> None:
        """The watchdog: wake at the earliest local deadline and lose what is past it."""
        stopping = self._signals.stopping
        while not stopping.is_set():
            deadlines = [s.deadline for s in self._workers.slots()]
            wake = min([*deadlines, time.monotonic() + IDLE_WAIT])
            if stopping.wait(max(0.0, wake - time.monotonic())):
                return
            self.expire()

    def expire(self) -> None:
        """The watchdog: every run past its local deadline is lost, whatever the database says."""
        now = time.monotonic()
        for slot in self._workers.slots():
            if now >= slot.deadline:
                self._lost(slot.run.lease.id, "its lease ran out before a renewal was confirmed")

    def renew(self) -> None:
        slots = self._workers.slots()
        if not slots:
            return
        started = time.monotonic()
        try:
            owned = self._renewals.heartbeat([s.run.lease for s in slots])
            self._health.succeeded()
            self._retry_at = None
        except DatabaseError as exc:
            self._retry_at = time.monotonic() + self._health.failed(exc)
            self.expire()
            return
        for slot in slots:
            if slot.run.lease.id in owned:
                slot.renewed_at = started
                slot.deadline = started + slot.run.lease.lease_seconds
                metrics.LEASE_RENEWALS.inc()
            else:
                self._lost(slot.run.lease.id, "another replica owns it now, or it was fenced out")

    def _lost(self, run_id: int, why: str) -> None:
        slot = self._workers.abandon(run_id)
        if slot is None:
            return
        lease = slot.run.lease
        metrics.LEASES_LOST.labels(lease.job_name).inc()
        slot.run.log.warning("lease lost: %s", why, extra={"action": "lease_lost"})
