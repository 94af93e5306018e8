"""What the operator knows about the ClaimSchedules it serves, keyed by namespace/name."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claimsched.schedule.schedules import Schedule
from claimsched.schedule.specs import JobSpec

from . import conditions
from .status import Alerting, Observation

# How long the conditions this process wrote outrank those on the body it was handed: longer
# than a watch event takes to bring our own patch back, shorter than a peering pause.
CONDITIONS_MEMORY_SECONDS = 30.0


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
        self._conditions: dict[str, tuple[float, list[dict[str, Any]]]] = {}

    def put(self, entry: Entry) -> None:
        with self._lock:
            self._entries[entry.owner] = entry

    def drop(self, owner: str) -> None:
        with self._lock:
            self._entries.pop(owner, None)
            self._conditions.pop(owner, None)

    def conditions(
        self, owner: str, on_body: Sequence[Mapping[str, Any]] | None
    ) -> Sequence[Mapping[str, Any]] | None:
        """A resource's conditions: those this process wrote last, if recent, else the body's.

        The reconcile handlers and the status timer both write the conditions list, and kopf
        runs them concurrently; a merge patch replaces the whole list. The body a timer reads
        lags behind the handler's patch until its watch event arrives, so merging onto the body
        alone could undo a condition just set (a lost Synced, then a second Synced Event).
        """
        with self._lock:
            return self._remembered(owner) or on_body

    def merge_conditions(
        self,
        owner: str,
        on_body: Sequence[Mapping[str, Any]] | None,
        wanted: Iterable[tuple[str, Any, str, str]],
        generation: int | None,
    ) -> list[dict[str, Any]] | None:
        """Apply `wanted` to the resource's conditions; the list to patch, or None if the body
        already shows it."""
        with self._lock:
            base = self._remembered(owner) or on_body
            merged = conditions.merged(base, wanted, generation)
            self._conditions[owner] = (time.monotonic(), merged)
        return None if merged == on_body else merged

    def _remembered(self, owner: str) -> list[dict[str, Any]] | None:
        found = self._conditions.get(owner)
        if found is None or time.monotonic() - found[0] > CONDITIONS_MEMORY_SECONDS:
            return None
        return found[1]

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
