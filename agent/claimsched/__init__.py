"""claimsched: scheduled jobs that run exactly once across N replicas, with no leader."""

from .agent import Agent
from .errors import (
    AuthenticationFailed,
    ClaimschedError,
    ConfigurationError,
    DatabaseAway,
    DatabaseConflict,
    DatabaseError,
    DatabaseUnavailable,
    InvalidSchedule,
    InvalidSpec,
    LeaseLost,
    SchemaMismatch,
    UnknownJob,
    UnknownTimeZone,
)
from .run.runs import Run
from .schedule.schedules import Schedule, parse_schedule
from .schedule.specs import JobSpec, from_claimschedule, job_spec
from .settings import AgentSettings
from .version import __version__

__all__ = [
    "Agent",
    "AgentSettings",
    "AuthenticationFailed",
    "ClaimschedError",
    "ConfigurationError",
    "DatabaseAway",
    "DatabaseConflict",
    "DatabaseError",
    "DatabaseUnavailable",
    "InvalidSchedule",
    "InvalidSpec",
    "JobSpec",
    "LeaseLost",
    "Run",
    "Schedule",
    "SchemaMismatch",
    "UnknownJob",
    "UnknownTimeZone",
    "__version__",
    "from_claimschedule",
    "job_spec",
    "parse_schedule",
]
