"""Housekeeping: presence, the reaper and max_runtime, in one cheap statement per period."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from . import metrics
from .errors import DatabaseError
from .version import __version__

if TYPE_CHECKING:
    from .agent import Agent


class Housekeeper:
    """Keeps this agent's presence row fresh and reaps expired leases (any replica may)."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def presence(self) -> dict[str, Any]:
        return {
            "hostname": socket.gethostname(),
            "pod": os.environ.get("POD_NAME"),
            "namespace": os.environ.get("POD_NAMESPACE"),
            "version": __version__,
            "ttl_seconds": max(3, int(self._agent.settings.housekeeping_seconds * 3)),
        }

    def once(self) -> None:
        agent = self._agent
        sent = time.time()
        found = agent.store.housekeeping(agent.agent_id, agent.handlers, self.presence())
        agent.clock.observe(found.db_now, sent, time.time())
        if found.orphaned or found.exhausted or found.overdue:
            metrics.ORPHANS_REAPED.inc(found.orphaned)
            agent.log.info(
                "reaper: %d orphaned, %d out of attempts, %d past max_runtime",
                found.orphaned,
                found.exhausted,
                found.overdue,
                extra={"action": "reap"},
            )
            agent.heartbeat.kick()
        if found.claimable:
            agent.want_reclaim()

    def loop(self, stopping: threading.Event) -> None:
        while not stopping.wait(self._agent.settings.housekeeping_seconds):
            try:
                self.once()
                self._agent.health.succeeded()
            except DatabaseError as exc:
                self._agent.health.failed(exc)
