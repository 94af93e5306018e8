"""The shapes that cross the Kubernetes boundary: what the operator reads from a ClaimSchedule
spec, and the status it writes (camelCase, exactly as the CRD declares it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claimsched.schedule.deadlines import DEFAULT_GRACE
from claimsched.schedule.specs import ALERT_BOUNDS

ConditionStatus = Literal["True", "False", "Unknown"]


def rfc3339(t: datetime) -> str:
    """An instant as the API server writes it: UTC, `Z`, fractions only when present."""
    text = t.astimezone(UTC).isoformat(timespec="microseconds" if t.microsecond else "seconds")
    return text.replace("+00:00", "Z")


class _Camel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class DatabaseRef(_Camel):
    """spec.databaseRef: a Secret in the resource's namespace holding a DSN."""

    name: str = Field(description="Name of the Secret.")
    key: str = Field("dsn", description="Key in the Secret's data that holds the DSN.")


_DEADLINE = ALERT_BOUNDS["startingDeadlineSeconds"]
_FAILURES = ALERT_BOUNDS["failureThreshold"]
_RECOVERIES = ALERT_BOUNDS["recoveryThreshold"]


class ClaimScheduleSpec(_Camel):
    """The spec fields the operator itself interprets (the rest goes to `from_claimschedule`)."""

    schedule: str = Field(description="Cron, descriptor or @every expression.")
    time_zone: str = Field("UTC", alias="timeZone", description="IANA time zone.")
    job_name: str | None = Field(None, alias="jobName", description="Job name in the database.")
    suspend: bool = Field(False, description="No new occurrences while true.")
    database_ref: DatabaseRef | None = Field(None, alias="databaseRef", description="DSN Secret.")
    starting_deadline_seconds: int | None = Field(
        None, alias="startingDeadlineSeconds",
        ge=_DEADLINE[0], le=_DEADLINE[1],
        description="Seconds after its fire time an occurrence may start before it is Late "
                    f"(unset: {DEFAULT_GRACE}).")
    failure_threshold: int = Field(
        3, alias="failureThreshold",
        ge=_FAILURES[0], le=_FAILURES[1],
        description="Consecutive failed runs that make the schedule failing.")
    recovery_threshold: int = Field(
        1, alias="recoveryThreshold",
        ge=_RECOVERIES[0], le=_RECOVERIES[1],
        description="Consecutive successful runs that clear failing.")


class Condition(_Camel):
    """A metav1.Condition."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition_time: str = Field(alias="lastTransitionTime")
    observed_generation: int | None = Field(None, alias="observedGeneration")


class LastRun(_Camel):
    """status.lastRun."""

    fire_time: str = Field(alias="fireTime")
    status: str
    attempt: int
    claimed_by: str | None = Field(None, alias="claimedBy")
    started_at: str | None = Field(None, alias="startedAt")
    finished_at: str | None = Field(None, alias="finishedAt")
    error: str | None = None


class OrphanedRuns(_Camel):
    current: int
    last24h: int


class FailedRuns(_Camel):
    last24h: int


class MissedRuns(_Camel):
    last24h: int
    total: int
    last_missed_time: str | None = Field(None, alias="lastMissedTime")


class ObservedStatus(_Camel):
    """The part of the status that comes from the database and the schedule, per interval."""

    next_fire_time: str | None = Field(None, alias="nextFireTime")
    next_fire_times: list[str] = Field(default_factory=list, alias="nextFireTimes")
    last_fire_time: str | None = Field(None, alias="lastFireTime")
    last_successful_time: str | None = Field(None, alias="lastSuccessfulTime")
    last_run: LastRun | None = Field(None, alias="lastRun")
    active_runs: int = Field(0, alias="activeRuns")
    orphaned_runs: OrphanedRuns = Field(alias="orphanedRuns")
    failed_runs: FailedRuns = Field(alias="failedRuns")
    missed_runs: MissedRuns = Field(alias="missedRuns")
    live_agents: int = Field(0, alias="liveAgents")
    late: bool = False
    late_fire_time: str | None = Field(None, alias="lateFireTime")
    consecutive_failures: int = Field(0, alias="consecutiveFailures")
    failing: bool = False
    durability: Literal["synchronous", "asynchronous", "standalone"] | None = None
    tzdata_versions: list[str] = Field(default_factory=list, alias="tzdataVersions")
