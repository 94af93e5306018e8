"""Named background threads that are watched: if one dies, the agent stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..logs import AgentLog


class Service(Protocol):
    """A background service of the agent: `start` spawns its named threads on the supervisor;
    `stop` wakes them so that they see the agent stopping (its signals say so) and end."""

    def start(self, supervisor: Supervisor) -> None: ...

    def stop(self) -> None: ...


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
