"""The database's notifications, passed on to the run services that act on them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..db import NOTIFY_AGENTS, NOTIFY_RUNS, NOTIFY_SCHEDULES, Listener, Poller, Store
from ..errors import DatabaseError
from ..health import DatabaseHealth
from .heartbeat import Heartbeat
from .housekeeping import Housekeeper
from .loop import Claimer
from .signals import Signals
from .supervisor import Supervisor

LISTEN_WAIT = 60.0  # seconds the listener blocks at most (stop and NOTIFY wake it earlier)


@dataclass
class Notifications:
    """Listens, as `agent_id`, for what other agents and the CLI write, and passes it on:
    changed schedules to the claim loop; runs that changed to the claim loop (they may want an
    owner) and to the heartbeat (ours may have been fenced out); changed peers to the
    housekeeper. While the database is away it waits the health's backoff, or until stopping.
    """

    store: Store
    agent_id: str
    claimer: Claimer
    heartbeat: Heartbeat
    housekeeper: Housekeeper
    health: DatabaseHealth
    signals: Signals
    listener: Listener | Poller | None = field(init=False, default=None)

    def listen(self) -> None:
        """LISTEN now (before the first schedule read: no change can slip in between)."""
        self.listener = self.store.listener(self.agent_id)
        self.listener.listen()

    def dispose(self) -> None:
        """Let the listener's connection go (the agent did not start after all)."""
        if self.listener is not None:
            self.listener.dispose()

    def start(self, supervisor: Supervisor) -> None:
        """Start passing notifications on, on a watched thread of its own."""
        supervisor.spawn("claimsched-listener", self.loop)

    def stop(self) -> None:
        """Interrupt the listener's wait so that it sees the agent stopping."""
        if self.listener is not None:
            self.listener.interrupt()

    def loop(self) -> None:
        listener = self.listener
        assert listener is not None, "listen() before start()"
        stopping = self.signals.stopping
        try:
            while not stopping.is_set():
                try:
                    fired = listener.wait(LISTEN_WAIT)
                except DatabaseError as exc:
                    stopping.wait(self.health.failed(exc))
                    continue
                if NOTIFY_SCHEDULES in fired:
                    self.claimer.schedules_changed(listener.changed())
                if NOTIFY_RUNS in fired:
                    self.signals.claimable()
                    self.heartbeat.kick()
                if NOTIFY_AGENTS in fired:
                    self.housekeeper.wake()  # peers changed
        finally:
            listener.dispose()
