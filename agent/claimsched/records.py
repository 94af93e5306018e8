"""Plain records that cross between the store and the agent."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from uuid import UUID

Want = Literal["running", "skipped"]
Status = Literal["done", "failed", "fenced_out"]  # how a run's handler ended (Completion)
Outcome = Literal[
    "claimed", "skipped", "taken", "no_capacity", "deferred", "not_due", "inactive", "stale",
    "contended",
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
    """A run this agent owns: the fencing token is (id, fire_time, attempt).

    `lease_token` is the claim's secret, which proves ownership along with the fencing token:
    it never leaves this process but to the database (not in repr, logs, metrics or status).
    """

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
    lease_token: UUID = field(repr=False)
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
    """A finished run to record: 'done' and 'failed' are the job's outcomes; 'fenced_out' gives
    the run back for its next attempt (the handler ended because the lease was lost)."""

    lease: Lease
    status: Status
    error: str | None = None
    backoff_seconds: float = 0.0


@dataclass(frozen=True)
class Queued:
    """A run queued by hand (trigger, backfill): pending until an agent takes it."""

    id: int
    job_name: str
    fire_time: datetime


#: Where a queued run stands for whoever waits for it: 'pending' while an owner will still
#: take it (not started, orphaned, or failed with a retry to come), 'failed' for good (no retry
#: will come, or it was skipped), 'gone' when no run has its key any more.
QueuedState = Literal["pending", "running", "done", "failed", "gone"]


@dataclass(frozen=True)
class QueuedRun:
    """A queued run as it is now (the store's queued_runs)."""

    run: Queued
    state: QueuedState
    status: str | None  # job_runs.status; None when gone
    attempt: int | None
    error: str | None


@dataclass(frozen=True)
class DatabaseIdentity:
    """Which database a connection reached, and how durable its commits are.

    A failover to a standby keeps `system_identifier` and moves to a new `timeline`; `durability`
    is 'synchronous', 'asynchronous' or 'standalone' (the durability contract:
    docs/pages/operations/postgres.md).
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
class AgentApi:
    """A version of the SQL API agents call that the schema serves (sql/functions/): the
    release whose agents first called it, whether this release's agents call it (`current`),
    and the live agents that call it now, each with its release."""

    api: int
    release: str
    current: bool
    callers: list[tuple[str, str]] = field(default_factory=list)  # (agent id, release)

    def __str__(self) -> str:
        who = ", ".join(f"{agent} ({release})" for agent, release in self.callers) or "none"
        role = "this release's agents" if self.current else "kept for older agents"
        return (f"agent API v{self.api} (claimsched {self.release}): {role}; "
                f"live agents calling it: {who}")


@dataclass(frozen=True)
class Housekeeping:
    """What one housekeeping pass found."""

    orphaned: int
    exhausted: int
    overdue: int
    claimable: bool
    db_now: datetime
    identity: DatabaseIdentity | None = None
    present: bool = True  # False: the agent's row has no job list (it was gone): send it
    peers: tuple[str, ...] = ()  # live agents with the same jobs, this one among them, sorted
    # the earliest end of a live lease another agent holds on a run of this agent's jobs
    next_expiry: datetime | None = None


# -- who owns a job's schedule ---------------------------------------------------------------
# A job has one owner: a code declaration, the CLI, or one ClaimSchedule. A would-be owner that
# finds another one is refused (cs_upsert_schedule in sql/functions/ decides, in one statement)
# and told who holds it, in words a person can act on. A row a ClaimSchedule released (source
# 'operator', no owner) belongs to the next declaration of the job.

WriteOutcome = Literal["created", "updated", "unchanged"]


def describe_owner(source: str, owner: str | None) -> str:
    """The owner of a row, for people: 'ClaimSchedule ns/name', 'the CLI', 'a code declaration'."""
    if source == "operator":
        return f"ClaimSchedule {owner}" if owner else "no one (released by its ClaimSchedule)"
    return "the CLI (claimsched apply)" if source == "cli" else "a code declaration"


def released(source: str, owner: str | None) -> bool:
    """A row its ClaimSchedule let go of: the next declaration of the job takes it."""
    return source == "operator" and owner is None


@dataclass(frozen=True)
class Written:
    """What writing a schedule did; `held_by` names the other owner that holds the job (then
    nothing was written)."""

    outcome: WriteOutcome
    held_by: str | None = None

    @classmethod
    def from_row(cls, row: tuple[str | None, str | None, bool, bool], source: str,
                 owner: str | None) -> Written:
        """From the (source, owner, written, created) an upsert statement answers, for a
        writer that is (`source`, `owner`). Source and owner are columns the statement writes,
        so a row the writer may take but did not change was already its own."""
        was_source, was_owner, written, created = row
        if not written and was_source is not None and (was_source, was_owner) != (source, owner):
            return cls("unchanged", held_by=describe_owner(was_source, was_owner))
        return cls("created" if created else "updated" if written else "unchanged")
