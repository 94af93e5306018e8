"""Kubernetes Events on transitions only: what changed between the stored status and the new
observation, never a repeat of the same state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from claimsched.schedule.deadlines import DEFAULT_GRACE

from .observations import Observation

NORMAL, WARNING = "Normal", "Warning"


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


def post(body: kopf.Body, event: Event) -> None:
    """Post `event` about the resource `body` (kopf queues it; the message fits an Event)."""
    kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


def _count(status: Mapping[str, Any], field: str, sub: str) -> int | None:
    value = (status.get(field) or {}).get(sub)
    return int(value) if value is not None else None


def transitions(
    job: str,
    old: Mapping[str, Any],
    new: Observation,
    previous: Observation | None,
    agents_were_available: bool | None,
) -> list[Event]:
    """The Events that the change from the stored status `old` to `new` deserves."""
    found: list[Event] = []
    status = new.status
    old_orphans = _count(old, "orphanedRuns", "last24h")
    if old_orphans is not None and status.orphaned_runs.last24h > old_orphans:
        found.append(Event(WARNING, "RunOrphaned", (
            f"job {job}: {status.orphaned_runs.last24h - old_orphans} run(s) lost their lease "
            f"(orphaned now: {status.orphaned_runs.current}); another agent reclaims them")))
    exhausted = 0
    if previous is not None and new.exhausted_day > previous.exhausted_day:
        exhausted = new.exhausted_day - previous.exhausted_day
        found.append(Event(WARNING, "AttemptsExhausted", (
            f"job {job}: {exhausted} run(s) failed after exhausting their attempts")))
    old_failed = _count(old, "failedRuns", "last24h")
    if old_failed is not None and status.failed_runs.last24h - old_failed > exhausted:
        last = status.last_run
        detail = f": {last.error}" if last and last.status == "failed" and last.error else ""
        found.append(Event(WARNING, "RunFailed", f"job {job}: a run failed{detail}"[:1024]))
    old_missed = _count(old, "missedRuns", "total")
    if old_missed is not None and status.missed_runs.total > old_missed:
        when = status.missed_runs.last_missed_time
        found.append(Event(WARNING, "Missed", (
            f"job {job}: {status.missed_runs.total - old_missed} occurrence(s) never ran"
            + (f" (latest {when})" if when else ""))))
    if status.late and old.get("late") is not True:
        found.append(Event(WARNING, "Late", (
            f"job {job}: no run of its occurrences since {status.late_fire_time}, past their "
            f"grace (spec.startingDeadlineSeconds, else {DEFAULT_GRACE}); each one is counted "
            "missed if it never runs")))
    if status.failing and old.get("failing") is not True:
        found.append(Event(WARNING, "FailingRepeatedly", (
            f"job {job}: {status.consecutive_failures} run(s) in a row failed")))
    if not status.failing and old.get("failing") is True:
        found.append(Event(NORMAL, "Recovered", f"job {job}: runs succeed again"))
    if status.durability == "asynchronous" and old.get("durability") != "asynchronous":
        found.append(Event(WARNING, "AsynchronousReplication", (
            f"job {job}: its database replicates asynchronously: a failover can lose the last "
            "claims and run an occurrence again (up to the replication lag); exactly-once "
            "across a failover needs synchronous replication")))
    versions = status.tzdata_versions
    if len(versions) > 1 and len(old.get("tzdataVersions") or ()) < 2:
        found.append(Event(WARNING, "TzdataMismatch", (
            f"job {job}: its live agents use different time zone databases "
            f"({', '.join(versions)}): a local time may map to two instants and run twice; "
            "give every replica the same tzdata")))
    available = status.live_agents > 0
    if not available and new.enabled and agents_were_available is not False:
        found.append(Event(WARNING, "NoLiveAgent", (
            f"no live agent has a handler for job {job}: its occurrences will not run")))
    return found
