"""Everything that talks to Postgres. The only package that imports psycopg."""

from .admin import Admin
from .claims import Claims
from .connection import checked_schema, compose, connect, dsn_parses, redact_dsn, redact_text
from .listener import NOTIFY_AGENTS, NOTIFY_RUNS, NOTIFY_SCHEDULES, Listener, Poller
from .listings import AgentRow, Listings, RunRow
from .migrations import (
    AGENT_API,
    SCHEMA_VERSION,
    Maintenance,
    ensure_partitions,
    maintain,
    migrate,
    schema_version,
)
from .owned import OwnedSchedules
from .receipts import Receipts
from .roles import AGENT_ROLE, OPERATOR_ROLE, Roles
from .schedules import Schedules, Suspension
from .session import SessionOptions
from .store import Store
from .views import Views

__all__ = [
    "AGENT_API",
    "AGENT_ROLE",
    "NOTIFY_AGENTS",
    "NOTIFY_RUNS",
    "NOTIFY_SCHEDULES",
    "OPERATOR_ROLE",
    "SCHEMA_VERSION",
    "Admin",
    "AgentRow",
    "Claims",
    "Listener",
    "Listings",
    "Maintenance",
    "OwnedSchedules",
    "Poller",
    "Receipts",
    "Roles",
    "RunRow",
    "Schedules",
    "SessionOptions",
    "Store",
    "Suspension",
    "Views",
    "checked_schema",
    "compose",
    "connect",
    "dsn_parses",
    "ensure_partitions",
    "maintain",
    "migrate",
    "redact_dsn",
    "redact_text",
    "schema_version",
]
