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
class Housekeeping:
    """What one housekeeping pass found."""

    orphaned: int
    exhausted: int
    overdue: int
    claimable: bool
    db_now: datetime
