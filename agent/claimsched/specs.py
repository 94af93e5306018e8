"""Job specifications: what a schedule row holds, validated before anything is written."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import (
    ClaimschedError,
    ConfigurationError,
    InvalidSchedule,
    InvalidSpec,
    UnknownTimeZone,
)
from .schedules import Schedule, parse_schedule

JOB_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?$")

ConcurrencyPolicy = Literal["Forbid", "Allow", "Replace"]
CatchUpPolicy = Literal["All", "Latest", "None"]
Source = Literal["operator", "code", "cli"]


def _name_problem(name: object) -> str:
    return (
        f"invalid job name {name!r}: use 1-128 letters, digits, '_', '.' or '-', "
        "starting and ending with a letter or digit"
    )


def validate_job_name(name: str) -> str:
    """The name, or InvalidSpec saying what a job name may contain."""
    if not isinstance(name, str) or not JOB_NAME.match(name):
        raise InvalidSpec(_name_problem(name))
    return name


class JobSpec(BaseModel):
    """One job's schedule and run settings: a row of `job_schedule`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_name: str = Field(description="The job's key: letters, digits, '_', '.', '-'.")
    schedule: str = Field(
        description="5-field cron, a descriptor (@daily...) or @every <duration>."
    )
    time_zone: str = Field("UTC", description="IANA time zone the cron fields are read in.")
    enabled: bool = Field(True, description="False suspends the job (no runs, no catch-up).")
    lease_seconds: int = Field(
        120, strict=True, ge=1, le=86400, description="Claim validity, seconds."
    )
    heartbeat_seconds: int = Field(
        30, strict=True, ge=1, le=28800, description="Lease renewal period, seconds."
    )
    max_attempts: int = Field(3, strict=True, ge=1, le=100, description="Attempts per occurrence.")
    retry_on_failure: bool = Field(False, description="Retry handler exceptions with backoff.")
    concurrency_policy: ConcurrencyPolicy = Field("Forbid", description="Overlapping occurrences.")
    catch_up_window_seconds: int = Field(
        3600, strict=True, ge=0, le=2678400, description="Catch-up horizon, s."
    )
    catch_up_policy: CatchUpPolicy = Field("Latest", description="Which missed occurrences run.")
    max_runtime_seconds: int | None = Field(
        None, strict=True, ge=1, description="Fail runs longer than this, s."
    )
    source: Source = Field("code", description="Who declared it.")
    owner: str | None = Field(None, description="namespace/name of the ClaimSchedule, if any.")

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, value: str) -> str:
        if not JOB_NAME.match(value):
            raise ValueError(_name_problem(value))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        if self.heartbeat_seconds * 3 > max(self.lease_seconds, 3):
            raise ValueError(
                f"heartbeat_seconds ({self.heartbeat_seconds}) must be at most a third of "
                f"lease_seconds ({self.lease_seconds})"
            )
        parse_schedule(self.schedule, self.time_zone)
        return self

    @property
    def parsed(self) -> Schedule:
        return parse_schedule(self.schedule, self.time_zone)

    def row(self) -> dict[str, Any]:
        return self.model_dump()


class ScheduleRecord(JobSpec):
    """A schedule as stored, with the database's bookkeeping."""

    active_since: datetime
    updated_at: datetime


def job_spec(**fields: Any) -> JobSpec:
    """Build a JobSpec, turning every validation problem into one clear InvalidSpec line."""
    try:
        return JobSpec(**fields)
    except ValidationError as exc:
        causes = [err.get("ctx", {}).get("error") for err in exc.errors()]
        if len(causes) == 1 and isinstance(causes[0], InvalidSchedule | UnknownTimeZone):
            raise causes[0] from None
        raise InvalidSpec(_explain(exc)) from None


def _explain(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, (InvalidSchedule, UnknownTimeZone)):
            problems.append(str(cause))
            continue
        where = ".".join(str(part) for part in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


_CRD_FIELDS = {
    "schedule": "schedule",
    "timeZone": "time_zone",
    "concurrencyPolicy": "concurrency_policy",
    "catchUpWindowSeconds": "catch_up_window_seconds",
    "catchUpPolicy": "catch_up_policy",
    "leaseSeconds": "lease_seconds",
    "heartbeatSeconds": "heartbeat_seconds",
    "maxAttempts": "max_attempts",
    "retryOnFailure": "retry_on_failure",
    "maxRuntimeSeconds": "max_runtime_seconds",
}
_CRD_ONLY = {"jobName", "suspend", "databaseRef"}


def from_claimschedule(doc: Any, *, source: Source = "operator") -> JobSpec:
    """Turn a ClaimSchedule document (a dict, as in YAML) into a JobSpec."""
    if not isinstance(doc, dict):
        raise InvalidSpec("a ClaimSchedule must be a mapping with apiVersion, kind, metadata, spec")
    if doc.get("kind") != "ClaimSchedule":
        raise InvalidSpec(f"expected kind ClaimSchedule, got {doc.get('kind')!r}")
    metadata = doc.get("metadata") or {}
    spec = doc.get("spec")
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        raise InvalidSpec("a ClaimSchedule needs metadata and spec mappings")
    unknown = sorted(set(spec) - set(_CRD_FIELDS) - _CRD_ONLY)
    if unknown:
        raise InvalidSpec(f"unknown field(s) in spec: {', '.join(unknown)}")
    name = spec.get("jobName") or metadata.get("name")
    if not name:
        raise InvalidSpec("a ClaimSchedule needs metadata.name or spec.jobName")
    namespace = metadata.get("namespace") or "default"
    fields = {ours: spec[theirs] for theirs, ours in _CRD_FIELDS.items() if theirs in spec}
    return job_spec(
        job_name=name,
        enabled=not spec.get("suspend", False),
        source=source,
        owner=f"{namespace}/{metadata.get('name', name)}",
        **fields,
    )


def load_claimschedules(path: Path, *, source: Source = "cli") -> list[JobSpec]:
    """Every ClaimSchedule in a YAML file, all validated before anything is written."""
    import yaml  # only the CLI reads files; the agent never needs it

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidSpec(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", exc)
        raise InvalidSpec(f"{path}: not valid YAML{where}: {problem}") from None
    if not docs:
        raise InvalidSpec(f"{path}: no ClaimSchedule documents")
    specs = []
    for index, doc in enumerate(docs, 1):
        try:
            specs.append(from_claimschedule(doc, source=source))
        except ClaimschedError as exc:
            raise type(exc)(f"{path}: document {index}: {exc}") from None
    names = [s.job_name for s in specs]
    if len(set(names)) != len(names):
        raise InvalidSpec(f"{path}: the same job name appears twice")
    return specs
