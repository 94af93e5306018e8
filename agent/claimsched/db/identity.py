"""Which database the store reaches: noticed at every new connection and every housekeeping
pass, so a failover (new timeline) or another database (new system identifier) is seen."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pgerrors

from ..records import DatabaseIdentity
from .queries import call

log = logging.getLogger("claimsched.store")


def read_identity(conn: psycopg.Connection[Any]) -> DatabaseIdentity | None:
    """The identity, or None while the schema (its database_identity() function) is missing.
    In a savepoint when `conn` is in a transaction, so a missing function aborts nothing."""
    try:
        with conn.transaction():
            row = conn.execute(call("database_identity")).fetchone()
    except pgerrors.UndefinedFunction:
        return None
    assert row is not None
    return DatabaseIdentity(system_identifier=row[0], timeline=row[1], durability=row[2])


class IdentityWatch:
    """Remembers the last identity seen; logs each change once and calls the listeners: on a
    failover everything in flight must be re-read (what the old primary acknowledged may be
    gone), on a durability change only the metric and the log change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: DatabaseIdentity | None = None
        self._on_failover: list[Callable[[DatabaseIdentity, DatabaseIdentity], None]] = []
        self._on_identity: list[Callable[[DatabaseIdentity], None]] = []

    def on_failover(self, call: Callable[[DatabaseIdentity, DatabaseIdentity], None]) -> None:
        """`call(before, now)` after the database changed under the store."""
        self._on_failover.append(call)

    def on_identity(self, call: Callable[[DatabaseIdentity], None]) -> None:
        """`call(identity)` at every observation (cheap: a metric)."""
        self._on_identity.append(call)

    def observe(self, found: DatabaseIdentity | None) -> None:
        if found is None:
            return
        with self._lock:
            before, self.current = self.current, found
        for listener in self._on_identity:
            listener(found)
        if before is None:
            log.info("database: %s", found, extra={"action": "db_identity"})
        elif found.failed_over_from(before):
            log.warning(
                "database failover: was %s, now %s; re-reading every run in flight",
                before,
                found,
                extra={"action": "failover"},
            )
            for on_failover in self._on_failover:
                on_failover(before, found)
        elif found.durability != before.durability:
            log.warning(
                "database durability changed from %s to %s",
                before.durability,
                found.durability,
                extra={"action": "durability"},
            )
