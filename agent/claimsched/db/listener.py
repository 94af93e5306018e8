"""Notifications: LISTEN on a dedicated connection (no polling while idle), or, behind a pooler
without a direct connection to listen on, a cheap poll that says what NOTIFY would have said."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import sql

from ..errors import ConfigurationError
from .connection import redact_dsn, translated
from .session import detect_pooling

#: The channels the SQL notifies on (the migrations' trigger, sql/queries.sql); the payload
#: ends with the schema, so agents of other schemas in the same database ignore it. A schedule
#: change's payload names the changed jobs first: `<job> <job> ...` (or `*`: too many), `\n`.
NOTIFY_SCHEDULES = "claimsched_schedule_names"
NOTIFY_RUNS = "claimsched_runs"
NOTIFY_AGENTS = "claimsched_agents"  # an agent came or went: peers changed (turns.py)
CHANNELS = (NOTIFY_SCHEDULES, NOTIFY_RUNS, NOTIFY_AGENTS)


class Listener:
    """A dedicated connection that LISTENs for schedule changes, runs wanting an owner and
    agents that came or went.

    It blocks in select() on the connection's socket (no polling while idle); `interrupt()`
    wakes it through a socket pair, for a prompt shutdown. After a reconnection (the database
    restarted or failed over) it LISTENs again and reports every channel as fired once: what
    was notified while it was away is lost, so everything must be looked at again.
    `must_be_direct` refuses a connection through a pooler (a listen_dsn must not be one).
    `changed()` says which schedules the notifications named.
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        schema: str,
        *,
        must_be_direct: bool = False,
    ) -> None:
        self._connect = connect
        self._schema = schema
        self._must_be_direct = must_be_direct
        self._conn: psycopg.Connection[Any] | None = None
        self._listened = False
        self._missed = False
        self._changed: set[str] | None = set()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)

    def listen(self) -> psycopg.Connection[Any]:
        """Connect and LISTEN (again after a failure); idempotent."""
        if self._conn is None or self._conn.closed:
            conn = self._connect()
            try:
                with translated():
                    where = redact_dsn(conn.info.dsn)
                    if self._must_be_direct and detect_pooling(conn, where) != "direct":
                        raise ConfigurationError(
                            f"listen_dsn ({where}) goes through a "
                            "connection pooler, where LISTEN never hears a notification: "
                            "point it at PostgreSQL itself"
                        )
                    for channel in CHANNELS:
                        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._missed, self._listened = self._listened, True
        return self._conn

    def interrupt(self) -> None:
        with suppress(OSError):
            self._wake_w.send(b"!")

    def wait(self, timeout: float) -> set[str]:
        """Block up to `timeout` seconds; the channels that fired for our schema."""
        conn = self.listen()
        fired: set[str] = set(CHANNELS) if self._missed else set()
        if self._missed:
            self._changed = None
        self._missed = False
        try:
            wake = self._wake_r.fileno()
            readable, _, _ = select.select([conn.fileno(), wake], [], [], timeout)
            if wake in readable:
                with suppress(BlockingIOError):
                    self._wake_r.recv(64)
            with translated():
                conn.pgconn.consume_input()
                while (note := conn.pgconn.notifies()) is not None:
                    channel, payload = note.relname.decode(), note.extra.decode()
                    names, schema = "", payload
                    if channel == NOTIFY_SCHEDULES:  # job names hold no newline; a schema may
                        names, _, schema = payload.partition("\n")
                    if schema != self._schema:
                        continue
                    fired.add(channel)
                    if channel == NOTIFY_SCHEDULES:
                        self._named(names)
        except Exception:
            self.close()
            raise
        return fired

    def _named(self, names: str) -> None:
        if self._changed is not None and names and names != "*":
            self._changed.update(names.split(" "))
        else:
            self._changed = None

    def changed(self) -> set[str] | None:
        """The schedules the notifications since the last call named; None: any may have
        changed (too many to name, or notifications were missed)."""
        changed, self._changed = self._changed, set()
        return changed

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def dispose(self) -> None:
        self.close()
        self._wake_r.close()
        self._wake_w.close()


class Poller:
    """The Listener's stand-in behind a pooler: one cheap statement every `period` seconds.

    `poll()` answers a fingerprint of the schedules (their epoch, which every commit that wrote
    them moves, in commit order) and whether runs want an owner; `wait` reports a changed
    fingerprint as a schedules notification, wanted runs as a runs one. It cannot say which
    schedules changed: `changed()` is None.
    """

    def __init__(self, poll: Callable[[], tuple[str, bool]], period: float) -> None:
        self._poll = poll
        self._period = period
        self._seen: str | None = None
        self._wake = threading.Event()

    def listen(self) -> None:
        """The first fingerprint: later changes are news."""
        if self._seen is None:
            self._seen, _ = self._poll()

    def interrupt(self) -> None:
        self._wake.set()

    def wait(self, timeout: float) -> set[str]:
        if self._wake.wait(min(timeout, self._period)):
            self._wake.clear()
            return set()
        self.listen()
        fingerprint, claimable = self._poll()
        fired = set[str]()
        if fingerprint != self._seen:
            self._seen = fingerprint
            fired.add(NOTIFY_SCHEDULES)
        if claimable:
            fired.add(NOTIFY_RUNS)
        return fired

    def changed(self) -> set[str] | None:
        return None

    def close(self) -> None:
        self._seen = None

    def dispose(self) -> None:
        self.close()
