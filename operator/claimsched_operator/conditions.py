"""Conditions with Kubernetes semantics: lastTransitionTime moves only when the status flips."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .models import Condition, ConditionStatus, rfc3339

READY = "Ready"
SYNCED = "Synced"
AGENTS_AVAILABLE = "AgentsAvailable"
PREVIOUS_RELEASED = "PreviousDatabaseReleased"  # only once a row moved to another database
ORDER = (READY, SYNCED, AGENTS_AVAILABLE)


def condition(
    type_: str, status: bool | None, reason: str, message: str = ""
) -> tuple[str, ConditionStatus, str, str]:
    """A wanted condition: (type, "True"/"False"/"Unknown", reason, message)."""
    text: ConditionStatus = "Unknown" if status is None else ("True" if status else "False")
    return type_, text, reason, message[:32768]


def merged(
    current: Sequence[Mapping[str, Any]] | None,
    wanted: Iterable[tuple[str, ConditionStatus, str, str]],
    generation: int | None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The conditions list after applying `wanted` to `current` (others kept as they are)."""
    stamp = rfc3339((now or datetime.now(UTC)).replace(microsecond=0))
    by_type = {str(c.get("type")): dict(c) for c in current or ()}
    for type_, status, reason, message in wanted:
        old = by_type.get(type_)
        moved = old is None or old.get("status") != status
        by_type[type_] = Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=stamp if moved or old is None else old["lastTransitionTime"],
            observed_generation=generation,
        ).dump()
    return sorted(by_type.values(), key=_rank)


def _rank(c: Mapping[str, Any]) -> tuple[int, str]:
    type_ = str(c.get("type"))
    return (ORDER.index(type_) if type_ in ORDER else len(ORDER), type_)


def status_of(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> str | None:
    for c in conditions or ():
        if c.get("type") == type_:
            return str(c.get("status"))
    return None
