"""Housekeeping: presence, the reaper and max_runtime, in one cheap statement per period; and
the memory the period freed goes back to the OS."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import memory, metrics
from .clock import DbClock
from .errors import DatabaseError
from .health import DatabaseHealth
from .logs import AgentLog
from .records import Housekeeping
from .version import __version__
from .zones import tzdata_version


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


@dataclass
class Housekeeper:
    """Keeps this agent's presence row fresh and reaps expired leases (any replica may).

    `sweep(listed)` sends the one housekeeping statement every `period` seconds, with the
    agent's job list when `listed` (the first time, and again at once whenever the row turned
    out not to hold it: deleted, or a database that never had it), else without (the row keeps
    it: with 100,000 jobs the list is megabytes). `on_reaped` is called when runs were fenced
    out (the heartbeat should look at once), `on_claimable` when runs want an owner, `on_peers`
    with the live agents that have the same jobs, every time.
    """

    sweep: Callable[[bool], Housekeeping]
    period: float
    clock: DbClock
    log: AgentLog
    health: DatabaseHealth
    on_reaped: Callable[[], None]
    on_claimable: Callable[[], None]
    on_peers: Callable[[tuple[str, ...]], None]
    _listed: bool = field(init=False, default=False)  # the row holds this agent's job list
    _wake: threading.Event = field(init=False, default_factory=threading.Event)

    @property
    def listed(self) -> bool:
        """Whether this agent's row held its job list at the last sweep."""
        return self._listed

    def once(self) -> None:
        listed = self._listed
        self._sweep(listed=not listed)
        if listed and not self._listed:  # the row lost the list: again, with it
            self._sweep(listed=True)

    def _sweep(self, listed: bool) -> None:
        sent = time.time()
        found = self.sweep(listed)
        self._listed = found.present
        self.on_peers(found.peers)
        self.clock.observe(found.db_now, sent, time.time())
        if found.orphaned or found.exhausted or found.overdue:
            metrics.ORPHANS_REAPED.inc(found.orphaned)
            self.log.info(
                "reaper: %d orphaned, %d out of attempts, %d past max_runtime",
                found.orphaned,
                found.exhausted,
                found.overdue,
                extra={"action": "reap"},
            )
            self.on_reaped()
        if found.claimable:
            self.on_claimable()

    def wake(self) -> None:
        """Sweep now (an agent came or went: the peers changed), or see that it stops."""
        self._wake.set()

    def loop(self, stopping: threading.Event) -> None:
        while True:
            self._wake.wait(self.period)
            self._wake.clear()
            if stopping.is_set():
                return
            try:
                self.once()
                self.health.succeeded()
            except DatabaseError as exc:
                self.health.failed(exc)
            # What reads and planner passes freed (100,000 schedules: MiBs); ~0.5 ms.
            memory.release_freed()
