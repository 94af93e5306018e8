"""What the operator knows about the ClaimSchedules it serves, keyed by namespace/name."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from claimsched.schedule.schedules import Schedule
from claimsched.schedule.specs import JobSpec

from .observations import Alerting, Observation


@dataclass(frozen=True)
class Entry:
    """One ClaimSchedule: its valid spec (None while invalid) and the database it lives in."""

    owner: str  # namespace/name
    job_name: str
    database: str  # key of databases.Databases
    spec: JobSpec | None
    schedule: Schedule | None = None
    alerting: Alerting = field(default_factory=Alerting)
    failing_before: bool = False  # status.failing as the spec was read (seeds the hysteresis)


class Catalog:
    """Thread-safe: handlers (executor threads) write, the status refresher reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._observed: dict[str, dict[str, Observation]] = {}
        self._generation: dict[str, int] = {}

    def put(self, entry: Entry) -> None:
        with self._lock:
            self._entries[entry.owner] = entry

    def drop(self, owner: str) -> None:
        with self._lock:
            self._entries.pop(owner, None)

    def get(self, owner: str) -> Entry | None:
        with self._lock:
            return self._entries.get(owner)

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def by_database(self) -> dict[str, list[Entry]]:
        grouped: dict[str, list[Entry]] = {}
        for entry in self.entries():
            if entry.spec is not None:
                grouped.setdefault(entry.database, []).append(entry)
        return grouped

    def publish(self, database: str, observed: dict[str, Observation]) -> None:
        with self._lock:
            self._observed[database] = observed
            self._generation[database] = self._generation.get(database, 0) + 1

    def observation(self, entry: Entry) -> Observation | None:
        with self._lock:
            return self._observed.get(entry.database, {}).get(entry.job_name)

    def refreshes(self, database: str) -> int:
        with self._lock:
            return self._generation.get(database, 0)
