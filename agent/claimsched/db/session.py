"""What every claimsched connection is given, and the pooler check: timeouts shorter than a
lease, TCP keepalives, read-write hosts only, commits that wait for durability.

Directly connected, the settings are set once per connection (session state). Behind a pooler
in transaction mode (pgbouncer) a session belongs to nobody: the same settings are then set
LOCAL at the start of every transaction, and no statement is prepared on the server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict

from ..errors import ConfigurationError

log = logging.getLogger("claimsched.store")

Pooling = Literal["direct", "transaction"]


@dataclass(frozen=True)
class SessionOptions:
    """Per-connection limits, seconds (0 turns a timeout off). Each should be shorter than the
    shortest lease, so no call can hang past it."""

    statement_timeout: float = 30.0
    lock_timeout: float = 10.0
    idle_in_transaction_timeout: float = 60.0
    tcp_keepalive: float = 10.0

    def connect_kwargs(self, dsn: str) -> dict[str, Any]:
        """libpq options for every connection, unless the DSN sets them itself: keepalives (a
        peer gone silent is noticed after idle + 3 probes at idle/2), a bound on unacknowledged
        data (tcp_user_timeout, the same span), and, for a DSN that names several hosts, a
        primary only (target_session_attrs=read-write), so that it finds the primary after a
        failover. A single host is not asked that way: libpq would judge it by the parameters
        the server announced, which a pooler repeats from its pool's first server connection,
        stale after a failover; the statement that sets up each connection (or, behind a
        pooler, each transaction) refuses a read-only server instead (connection.configure)."""
        try:
            given = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:  # not a DSN: connecting says so, translated
            given = {}
        idle = max(1, round(self.tcp_keepalive))
        interval = max(1, idle // 2)
        wanted: dict[str, Any] = {
            "keepalives": 1,
            "keepalives_idle": idle,
            "keepalives_interval": interval,
            "keepalives_count": 3,
            "tcp_user_timeout": (idle + 3 * interval) * 1000,
        }
        if _host_count(given) > 1:
            wanted["target_session_attrs"] = "read-write"
        return {key: value for key, value in wanted.items() if key not in given}

    def settings(self, search_path: str, local: bool) -> dict[str, Any]:
        """The parameters of the `session_settings` query."""
        return {
            "search_path": search_path,
            "statement_timeout": _millis(self.statement_timeout),
            "lock_timeout": _millis(self.lock_timeout),
            "idle_timeout": _millis(self.idle_in_transaction_timeout),
            "local": local,
        }


def _host_count(given: dict[str, Any]) -> int:
    """How many hosts a parsed DSN names (host or hostaddr, comma-separated; none: one)."""
    return max(len(str(given.get(key) or "").split(",")) for key in ("host", "hostaddr"))


def _millis(seconds: float) -> str:
    return str(round(seconds * 1000))


def detect_pooling(conn: psycopg.Connection[Any], dsn_text: str) -> Pooling:
    """'direct', or 'transaction' behind a pooler; a pooler in statement mode is refused.

    A pooler answers the startup with a backend pid of its own: the server's pg_backend_pid()
    then differs (pgbouncer 1.18 offers no other sign to an ordinary client). Session mode
    cannot be told from transaction mode without its admin console, so any pooler is treated
    as transaction mode: nothing is assumed to last beyond one transaction.
    """
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    if row is not None and row[0] == conn.info.backend_pid:
        return "direct"
    try:
        with conn.transaction():
            conn.execute("SELECT 1")
    except (pgerrors.ProtocolViolation, pgerrors.FeatureNotSupported) as exc:
        raise ConfigurationError(
            f"a connection pooler in statement mode is in front of the database ({dsn_text}): "
            "claimsched needs transactions; use pool_mode = transaction (or session)"
        ) from exc
    return "transaction"


def pooling_note(pooling: Pooling, listen_dsn: bool, poll_seconds: float) -> str:
    """One line for the log: how this store talks to the database."""
    if pooling == "direct":
        return "connected directly to PostgreSQL: session settings, LISTEN for notifications"
    listen = (
        "LISTEN on listen_dsn"
        if listen_dsn
        else f"no LISTEN through the pooler: polling every {poll_seconds:g} s"
    )
    return (
        "a connection pooler is in front of PostgreSQL (transaction mode assumed): settings "
        f"per transaction, no server-side prepared statements, {listen}"
    )
