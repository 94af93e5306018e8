"""The one writer of a ClaimSchedule's status: every key and the merge of its conditions.

Handlers and timers say what they want (`Writer.conditions`, `Writer.put`, `Writer.observed`);
only this module touches kopf's `patch.status`. A condition's lastTransitionTime moves only when
its status flips (`conditions.merged`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import kopf

from . import conditions
from .models import ConditionStatus, ObservedStatus

Wanted = tuple[str, ConditionStatus, str, str]

#: How long the conditions this process wrote outrank those on the body it was handed: longer
#: than a watch event takes to bring our own patch back, shorter than a peering pause.
CONDITIONS_MEMORY_SECONDS = 30.0

#: The keys the status timer copies from an observation (`Writer.observed`): all of its fields.
OBSERVED_KEYS = tuple(f.alias or name for name, f in ObservedStatus.model_fields.items())

#: The keys handlers set (`Writer.put`); with OBSERVED_KEYS and conditions, every status key.
HANDLER_KEYS = ("observedGeneration", "jobName", "resolvedSchedule", "database",
                "unreleasedDatabases", "lastTrigger")


class Written:
    """The conditions this process patched last, per resource (namespace/name). Thread-safe.

    kopf runs the reconcile handlers and the status timers of one resource concurrently, and a
    merge patch replaces the whole conditions list. The body a timer is handed lags behind a
    handler's patch until its watch event arrives, so merging onto the body alone could undo a
    condition just set (a lost Synced, then a second Synced Event)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conditions: dict[str, tuple[float, list[dict[str, Any]]]] = {}

    def conditions(
        self, owner: str, on_body: Sequence[Mapping[str, Any]] | None
    ) -> Sequence[Mapping[str, Any]] | None:
        """A resource's conditions: those this process wrote last, if recent, else the body's."""
        with self._lock:
            return self._remembered(owner) or on_body

    def merge(
        self,
        owner: str,
        on_body: Sequence[Mapping[str, Any]] | None,
        wanted: Iterable[Wanted],
        generation: int | None,
    ) -> list[dict[str, Any]] | None:
        """Apply `wanted` to the resource's conditions; the list to patch, or None if the body
        already shows it."""
        with self._lock:
            base = self._remembered(owner) or on_body
            merged = conditions.merged(base, wanted, generation)
            self._conditions[owner] = (time.monotonic(), merged)
        return None if merged == on_body else merged

    def forget(self, owner: str) -> None:
        with self._lock:
            self._conditions.pop(owner, None)

    def _remembered(self, owner: str) -> list[dict[str, Any]] | None:
        found = self._conditions.get(owner)
        if found is None or time.monotonic() - found[0] > CONDITIONS_MEMORY_SECONDS:
            return None
        return found[1]


class Writer:
    """One handler call's view of a resource's status, and its only way to change it."""

    def __init__(self, written: Written, owner: str, status: Mapping[str, Any],
                 generation: int | None, patch: kopf.Patch) -> None:
        self._written = written
        self._owner = owner
        self._status = status
        self._on_body: Sequence[Mapping[str, Any]] | None = status.get("conditions")
        self._generation = generation
        self._patch = patch
        self.before = written.conditions(owner, self._on_body)  # as the call began

    def status_of(self, type_: str) -> str | None:
        """A condition's status as the call began."""
        return conditions.status_of(self.before, type_)

    def conditions(self, *wanted: Wanted) -> None:
        """Set these conditions (others kept), patching only what the body does not show."""
        merged = self._written.merge(self._owner, self._on_body, wanted, self._generation)
        if merged is not None:
            self._patch.status["conditions"] = merged

    def put(self, key: str, value: Any) -> None:
        """Set one of HANDLER_KEYS (None removes it)."""
        if key not in HANDLER_KEYS:
            raise KeyError(f"status.{key} is not a key handlers write")
        self._patch.status[key] = value

    def observed(self, observed: ObservedStatus) -> None:
        """Set the OBSERVED_KEYS to what a status refresh observed, patching those that differ
        from the body (None removes one). A lastMissedTime the body shows is kept while runs are
        still counted missed and the refresh no longer sees when the last one was."""
        fresh = observed.dump()
        missed = fresh["missedRuns"]
        kept = (self._status.get("missedRuns") or {}).get("lastMissedTime")
        if missed["total"] and "lastMissedTime" not in missed and kept:
            missed["lastMissedTime"] = kept
        for key in OBSERVED_KEYS:
            if self._status.get(key) != fresh.get(key):
                self._patch.status[key] = fresh.get(key)
