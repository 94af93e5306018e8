"""The database's health as the agent sees it: one log line per change, a capped backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .conflicts import CONFLICT_RETRY
from .conflicts import retry_conflicts as retry_conflicts  # its callers' old door
from .errors import DatabaseAway, DatabaseConflict
from .logs import AgentLog

T = TypeVar("T")

def retry_away(step: Callable[[], T], give_up_after: float, log: AgentLog,
               stopping: threading.Event | None = None) -> T:
    """Run `step` until the database answers: while it is away (DatabaseAway: down, restarting,
    failing over), try again with a doubling pause (0.5 s up to 8 s) for `give_up_after` seconds,
    or until `stopping` is set, then let the last error out. Any other error (a wrong DSN, a
    refused password) at once."""
    deadline = time.monotonic() + give_up_after
    pause = 0.5
    while True:
        try:
            return step()
        except DatabaseAway as exc:
            left = deadline - time.monotonic()
            if left <= 0 or (stopping is not None and stopping.is_set()):
                raise
            log.warning("%s; trying again in %.1f s", exc, min(pause, left),
                        extra={"action": "connect"})
            if stopping is None:
                time.sleep(min(pause, left))
            elif stopping.wait(min(pause, left)):
                raise
            pause = min(pause * 2, 8.0)


class DatabaseHealth:
    """Logs once per state change (down, back), and hands out a capped backoff while down."""

    def __init__(self, log: AgentLog, on_recovered: Callable[[], None]) -> None:
        self._log = log
        self._on_recovered = on_recovered
        self._lock = threading.Lock()
        self._failures = 0

    @property
    def up(self) -> bool:
        return self._failures == 0

    def failed(self, exc: BaseException) -> float:
        """Note a failure; returns how long to wait before trying again, seconds."""
        if isinstance(exc, DatabaseConflict):  # not an outage: the database is fine
            self._log.debug("%s", exc, extra={"action": "conflict"})
            return CONFLICT_RETRY
        with self._lock:
            self._failures += 1
            failures = self._failures
        if failures == 1:
            self._log.error("database unavailable, retrying: %s", exc, extra={"action": "db_down"})
        return float(min(0.25 * 2 ** min(failures, 10), 5.0))

    def succeeded(self) -> None:
        with self._lock:
            recovered, self._failures = self._failures > 0, 0
        if recovered:
            self._log.warning("database is back; catching up", extra={"action": "db_up"})
            self._on_recovered()
