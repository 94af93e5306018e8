"""Job specifications: what a schedule row holds, validated before anything is written."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import ClaimschedError, ConfigurationError, InvalidSpec
from .schedules import Schedule, parse_schedule

MAX_REASON = 1024  # characters of a suspend reason
JOB_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?$")

ConcurrencyPolicy = Literal["Forbid", "Allow", "Replace"]
CatchUpPolicy = Literal["All", "Latest", "None"]
Source = Literal["operator", "code", "cli"]

# Strictly ints (a bool, 1.5 or "5" is refused): (least, most) per field.
BOUNDS: dict[str, tuple[int, int | None]] = {
    "lease_seconds": (1, 86400),
    "heartbeat_seconds": (1, 28800),
    "max_attempts": (1, 100),
    "catch_up_window_seconds": (0, 2678400),
    "max_runtime_seconds": (1, None),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "concurrency_policy": get_args(ConcurrencyPolicy),
    "catch_up_policy": get_args(CatchUpPolicy),
    "source": get_args(Source),
}
#: The ClaimSchedule's alert settings (read by the operator, not stored): (least, most), by the
#: CRD's names. The operator's models and the CRD take these (tests walk each against them).
ALERT_BOUNDS: dict[str, tuple[int, int]] = {
    "startingDeadlineSeconds": (1, 2678400),
    "failureThreshold": (1, 100),
    "recoveryThreshold": (1, 100),
}


def heartbeat_fits(heartbeat_seconds: int, lease_seconds: int) -> bool:
    """A heartbeat at most a third of the lease, so that a lease survives two missed heartbeats;
    a lease under 3 s takes the shortest heartbeat (1 s). The CRD's CEL rule and the SQL CHECK
    say the same."""
    return heartbeat_seconds * 3 <= max(lease_seconds, 3)


def _name_problem(name: object) -> str:
    return (
        f"invalid job name {name!r}: use 1-128 letters, digits, '_', '.' or '-', "
        "starting and ending with a letter or digit"
    )


def validate_job_name(name: str) -> str:
    """The name, or InvalidSpec saying what a job name may contain."""
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise InvalidSpec(_name_problem(name))
    return name


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """One job's schedule and run settings: a row of `job_schedule`.

    Validated on construction: InvalidSpec names every bad field ("field: problem; ..."), or
    InvalidSchedule / UnknownTimeZone when the fields are fine but the schedule is not.
    """

    job_name: str  # the job's key: letters, digits, '_', '.', '-'
    schedule: str  # 5-field cron (H for a value hashed from the name), a descriptor or @every
    time_zone: str = "UTC"  # IANA time zone the cron fields are read in
    enabled: bool = True  # False suspends the job (no runs, no catch-up)
    lease_seconds: int = 120  # claim validity, seconds
    heartbeat_seconds: int = 30  # lease renewal period, seconds
    max_attempts: int = 3  # attempts per occurrence
    retry_on_failure: bool = False  # retry handler exceptions with backoff
    concurrency_policy: ConcurrencyPolicy = "Forbid"  # overlapping occurrences
    catch_up_window_seconds: int = 3600  # catch-up horizon, seconds
    catch_up_policy: CatchUpPolicy = "Latest"  # which missed occurrences run
    max_runtime_seconds: int | None = None  # fail runs longer than this, seconds
    source: Source = "code"  # who declared it
    owner: str | None = None  # namespace/name of the ClaimSchedule, if any
    suspend_reason: str | None = None  # why it is suspended, for people (at most 1024 chars)
    suspend_until: datetime | None = None  # suspended until then (enabled stays True): nothing
    #                                        at or before it runs; it resumes by itself
    _schedule: Schedule = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise InvalidSpec("; ".join(problems))
        if not heartbeat_fits(self.heartbeat_seconds, self.lease_seconds):
            raise InvalidSpec(
                f"heartbeat_seconds ({self.heartbeat_seconds}) must be at most a third of "
                f"lease_seconds ({self.lease_seconds})"
            )
        # Raises InvalidSchedule / UnknownTimeZone; parsed once, kept (its rule stays shared).
        object.__setattr__(self, "_schedule",
                           parse_schedule(self.schedule, self.time_zone, self.job_name))

    def _problems(self) -> list[str]:
        problems = []
        if not isinstance(self.job_name, str) or not JOB_NAME.fullmatch(self.job_name):
            problems.append(f"job_name: {_name_problem(self.job_name)}")
        for name in ("schedule", "time_zone"):
            if not isinstance(getattr(self, name), str):
                problems.append(f"{name}: expected a string, got {getattr(self, name)!r}")
        if self.owner is not None and not isinstance(self.owner, str):
            problems.append(f"owner: expected a string or nothing, got {self.owner!r}")
        reason = self.suspend_reason
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            problems.append(f"suspend_reason: expected text of at most {MAX_REASON} characters")
        until = self.suspend_until
        if until is not None and (not isinstance(until, datetime) or until.utcoffset() is None):
            problems.append(f"suspend_until: expected an instant with a time zone, got {until!r}")
        for name in ("enabled", "retry_on_failure"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name}: expected true or false, got {getattr(self, name)!r}")
        for name, (least, most) in BOUNDS.items():
            value = getattr(self, name)
            if value is None and name in _OPTIONAL:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append(f"{name}: expected an integer, got {value!r}")
            elif value < least or (most is not None and value > most):
                allowed = f"between {least} and {most}" if most is not None else f"at least {least}"
                problems.append(f"{name}: must be {allowed}, got {value}")
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                problems.append(
                    f"{name}: must be one of {', '.join(choices)}, got {getattr(self, name)!r}"
                )
        return problems

    def suspended_at(self, now: datetime) -> bool:
        """Suspended (or disabled) at ``now``: off, or inside a suspension with an end."""
        return not self.enabled or (self.suspend_until is not None and self.suspend_until > now)

    @property
    def parsed(self) -> Schedule:
        """The schedule, its hashed fields (``H``) resolved for this job's name."""
        return self._schedule

    def row(self) -> dict[str, Any]:
        """Every field by name: the parameters of the statements that write a schedule."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleRecord(JobSpec):
    """A schedule as stored, with the database's bookkeeping."""

    active_since: datetime
    updated_at: datetime

    def __post_init__(self) -> None:
        JobSpec.__post_init__(self)  # slots: a new class, where super() without arguments fails
        for name in ("active_since", "updated_at"):
            if not isinstance(getattr(self, name), datetime):
                raise InvalidSpec(f"{name}: expected a datetime, got {getattr(self, name)!r}")

    @property
    def active_from(self) -> datetime:
        """Occurrences at or before this never run: the later of `active_since` and the end
        of a suspension (the claim statement draws the same line)."""
        until = self.suspend_until
        return self.active_since if until is None else max(self.active_since, until)


_SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(JobSpec) if f.init)
#: The job_schedule columns a spec writes (every field but the key), in one order: the SQL's
#: column lists are made from it (claimsched.db.queries).
SPEC_COLUMNS = tuple(f.name for f in dataclasses.fields(JobSpec)
                     if f.init and f.name != "job_name")
#: The columns of a suspension: set by `claimsched suspend` / `resume` on a code declaration's
#: row, which a code declaration (the app restarting) never changes back.
SUSPENSION_COLUMNS = ("enabled", "suspend_reason", "suspend_until")
_OPTIONAL = frozenset(f.name for f in dataclasses.fields(JobSpec) if f.init and f.default is None)
_REQUIRED = ("job_name", "schedule")


def job_spec(**fields: Any) -> JobSpec:
    """Build a JobSpec, turning every validation problem into one clear InvalidSpec line."""
    problems = [f"{name}: not a job setting" for name in sorted(set(fields) - _SPEC_FIELDS)]
    problems += [f"{name}: is required" for name in _REQUIRED if name not in fields]
    if problems:
        raise InvalidSpec("; ".join(problems))
    return JobSpec(**fields)


#: The ClaimSchedule's spec fields that are JobSpec fields: CRD name -> field name.
CRD_FIELDS = {
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
#: The ClaimSchedule's other spec fields, read by the operator (not stored as such in
#: job_schedule): the job's name, its suspension, where the row lives, and when to alert.
CRD_ONLY = frozenset({"jobName", "suspend", "suspendUntil", "suspendReason", "databaseRef",
                      *ALERT_BOUNDS})


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
    unknown = sorted(set(spec) - set(CRD_FIELDS) - CRD_ONLY)
    if unknown:
        raise InvalidSpec(f"unknown field(s) in spec: {', '.join(unknown)}")
    name = spec.get("jobName") or metadata.get("name")
    if not name:
        raise InvalidSpec("a ClaimSchedule needs metadata.name or spec.jobName")
    namespace = metadata.get("namespace") or "default"
    fields = {ours: spec[theirs] for theirs, ours in CRD_FIELDS.items() if theirs in spec}
    suspend = spec.get("suspend", False)
    until = _suspend_until(spec.get("suspendUntil"))
    if until is not None and suspend is not True:
        raise InvalidSpec("suspendUntil: needs suspend: true (it says when the suspension ends)")
    return job_spec(
        job_name=name,
        enabled=not suspend or until is not None,
        suspend_until=until,
        suspend_reason=spec.get("suspendReason") if suspend else None,
        source=source,
        owner=f"{namespace}/{metadata.get('name', name)}",
        **fields,
    )


def _suspend_until(value: object) -> datetime | None:
    """spec.suspendUntil: an RFC 3339 instant (YAML may already have made it a datetime)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(text := value)
        except ValueError:
            raise InvalidSpec(f"suspendUntil: {text[:64]!r} is not an RFC 3339 instant, e.g. "
                              "2026-11-30T06:00:00Z") from None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidSpec(f"suspendUntil: expected an RFC 3339 instant with a zone (Z or "
                          f"+01:00), got {value!r}")
    return value


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
