"""Plain records that cross between the store and the agent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Want = Literal["running", "skipped"]
Outcome = Literal[
    "claimed", "skipped", "taken", "no_capacity", "deferred", "not_due", "inactive", "stale"
]


@dataclass(frozen=True)
class Candidate:
    """An occurrence this replica proposes to claim (or to record as skipped, with a reason)."""

    job_name: str
    fire_time: datetime
    since: datetime  # the schedule it was computed from: its active_since when read
    want: Want = "running"
    reason: str | None = None
    latest: bool = True


@dataclass(frozen=True)
class Lease:
    """A run this agent owns: the fencing token is (id, fire_time, attempt)."""

    id: int
    job_name: str
    fire_time: datetime
    attempt: int
    lease_until: datetime
    started_at: datetime
    lease_seconds: float
    heartbeat_seconds: float
    max_attempts: int
    retry_on_failure: bool
    kind: str = "scheduled"


@dataclass(frozen=True)
class ClaimResult:
    """What the database decided about one candidate."""

    job_name: str
    fire_time: datetime
    outcome: Outcome
    lease: Lease | None


@dataclass(frozen=True)
class Completion:
    """A finished run to record."""

    lease: Lease
    status: Literal["done", "failed"]
    error: str | None = None
    backoff_seconds: float = 0.0


@dataclass(frozen=True)
class DatabaseIdentity:
    """Which database a connection reached, and how durable its commits are.

    A failover to a standby keeps `system_identifier` and moves to a new `timeline`; `durability`
    is 'synchronous', 'asynchronous' or 'standalone' (see the README's durability contract).
    """

    system_identifier: str
    timeline: int
    durability: str

    def failed_over_from(self, before: DatabaseIdentity) -> bool:
        return (
            self.system_identifier != before.system_identifier or self.timeline != before.timeline
        )

    def __str__(self) -> str:
        return (
            f"system {self.system_identifier} timeline {self.timeline}, "
            f"durability {self.durability}"
        )


@dataclass(frozen=True)
class Housekeeping:
    """What one housekeeping pass found."""

    orphaned: int
    exhausted: int
    overdue: int
    claimable: bool
    db_now: datetime
    identity: DatabaseIdentity | None = None
