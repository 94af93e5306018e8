"""A deadline for what a statement waits on the wire.

Postgres bounds a statement it runs (statement_timeout), and a dead server or network ends the
wait at once or at the keepalives. A pooler that PAUSEs (pgbouncer during a failover or a
maintenance) holds a statement before any server sees it, for as long as it pauses, and nothing
on either side times it out. A stopping agent must not wait that long: past its deadline the
connection's socket is shut, the wait raises, and the pool throws the connection away.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg


@contextlib.contextmanager
def cut_off_at(conn: psycopg.Connection[Any], deadline: float | None) -> Iterator[None]:
    """While the block runs, shut `conn`'s socket if it still runs at `deadline`
    (time.monotonic()); with no deadline, nothing."""
    if deadline is None:
        yield
        return
    lock, done = threading.Lock(), [False]

    def cut() -> None:
        with lock:
            if not done[0]:
                _shut(conn)

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done[0] = True
        timer.cancel()


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut the socket under `conn` (a copy of its descriptor: libpq keeps its own), so that
    whatever waits on it sees the connection end."""
    with contextlib.suppress(OSError, psycopg.Error):
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
