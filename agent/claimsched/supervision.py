"""Named background threads that are watched, and the database's health as the agent sees it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .errors import DatabaseConflict
from .logs import AgentLog


class Supervisor:
    """Starts named threads; if one dies, says so loudly and calls `on_fatal` (the agent stops)."""

    def __init__(self, log: AgentLog, on_fatal: Callable[[BaseException], None]) -> None:
        self._log = log
        self._on_fatal = on_fatal
        self.threads: list[threading.Thread] = []

    def spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        def watched() -> None:
            try:
                target()
            except BaseException as exc:
                self._log.critical(
                    "background task %s died: %r; stopping the agent",
                    name,
                    exc,
                    exc_info=True,
                    extra={"action": "fatal"},
                )
                self._on_fatal(exc)

        thread = threading.Thread(target=watched, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join_one(self, name: str, timeout: float = 10.0) -> None:
        for thread in self.threads:
            if thread.name == name and thread is not threading.current_thread():
                thread.join(timeout)

    def join(self, until: float) -> None:
        """Wait for every thread until `until` (time.monotonic()) at the latest."""
        current = threading.current_thread()
        for thread in self.threads:
            if thread is not current:
                thread.join(max(0.0, until - time.monotonic()))


CONFLICT_RETRY = 0.02  # seconds before retrying a statement that lost a deadlock


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
