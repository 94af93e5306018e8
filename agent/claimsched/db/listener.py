"""LISTEN for claimsched's notifications on a dedicated connection, without polling."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import sql

from .connection import translated

#: The channels the SQL notifies on (sql/schema.sql's trigger, sql/queries.sql); the payload
#: is the schema, so agents of other schemas in the same database ignore it.
NOTIFY_SCHEDULES = "claimsched_schedules"
NOTIFY_RUNS = "claimsched_runs"
CHANNELS = (NOTIFY_SCHEDULES, NOTIFY_RUNS)


class Listener:
    """A dedicated connection that LISTENs for schedule changes and runs wanting an owner.

    It blocks in select() on the connection's socket (no polling while idle); `interrupt()`
    wakes it through a socket pair, for a prompt shutdown.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], schema: str) -> None:
        self._connect = connect
        self._schema = schema
        self._conn: psycopg.Connection[Any] | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)

    def listen(self) -> psycopg.Connection[Any]:
        """Connect and LISTEN (again after a failure); idempotent."""
        if self._conn is None or self._conn.closed:
            conn = self._connect()
            with translated():
                for channel in CHANNELS:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self._conn = conn
        return self._conn

    def interrupt(self) -> None:
        with suppress(OSError):
            self._wake_w.send(b"!")

    def wait(self, timeout: float) -> set[str]:
        """Block up to `timeout` seconds; the channels that fired for our schema."""
        conn = self.listen()
        fired: set[str] = set()
        try:
            wake = self._wake_r.fileno()
            readable, _, _ = select.select([conn.fileno(), wake], [], [], timeout)
            if wake in readable:
                with suppress(BlockingIOError):
                    self._wake_r.recv(64)
            with translated():
                conn.pgconn.consume_input()
                while (note := conn.pgconn.notifies()) is not None:
                    if note.extra.decode() == self._schema:
                        fired.add(note.relname.decode())
        except Exception:
            self.close()
            raise
        return fired

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def dispose(self) -> None:
        self.close()
        self._wake_r.close()
        self._wake_w.close()
