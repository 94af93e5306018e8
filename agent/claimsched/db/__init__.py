"""Everything that talks to Postgres. The only package that imports psycopg."""

from .connection import checked_schema, compose, connect, dsn_parses, redact_dsn, redact_text
from .listener import NOTIFY_AGENTS, NOTIFY_RUNS, NOTIFY_SCHEDULES, Listener, Poller
from .migrations import (
    AGENT_API,
    SCHEMA_VERSION,
    ensure_partitions,
    maintain,
    migrate,
    schema_version,
)
from .owned import OwnedSchedules
from .roles import AGENT_ROLE, OPERATOR_ROLE, Roles
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
    "Listener",
    "OwnedSchedules",
    "Poller",
    "Roles",
    "SessionOptions",
    "Store",
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
