"""The store: a pool of connections to one claimsched schema, and the doors through which every
statement goes, one per audience: `claims` (the agent's hot path), `schedules`, `admin` (the
schema's keeping), `listings` (the CLI) and `receipts` (effects); the operator's and the web
view's doors (owned.py, views.py) stand on a store too."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
import psycopg_pool

from .admin import Admin
from .claims import Claims
from .connection import checked_schema, configure, connect, make_pool, redact_dsn, translated
from .cutoff import cut_off_at
from .identity import IdentityWatch, read_identity
from .listener import Listener, Poller
from .listings import Listings
from .queries import query
from .receipts import Receipts
from .schedules import Schedules
from .session import Pooling, SessionOptions, detect_pooling, pooling_note

log = logging.getLogger("claimsched.store")


class Store:
    """A pool of connections to one claimsched schema, and its doors: `claims`, `schedules`,
    `admin`, `listings` and `receipts`, each with the statements of one audience."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "claimsched",
        pool: psycopg_pool.ConnectionPool[Any] | None = None,
        max_size: int = 8,
        name: str = "claimsched",
        options: SessionOptions | None = None,
        listen_dsn: str | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        if pool is None and not dsn:
            raise ValueError("a Store needs a dsn or a pool")
        self.schema = checked_schema(schema)
        self.dsn: str = dsn or str(pool.conninfo)  # type: ignore[union-attr]
        self.options = options or SessionOptions()
        self.listen_dsn = listen_dsn
        self.poll_seconds = poll_seconds
        self.pooling: Pooling = "direct"
        self.identity = IdentityWatch()
        self._own_pool = pool is None
        self._pool_size, self._pool_name = max_size, name
        self.pool = pool or self._new_pool()
        self._opened = not self._own_pool
        self._give_up_at: float | None = None
        self.claims = Claims(self.connection, self.identity)
        self.schedules = Schedules(self.connection)
        self.admin = Admin(self.connection, self._unhurried, self.schema, self.identity)
        self.listings = Listings(self.connection)
        self.receipts = Receipts(self.connection, schema)

    def __repr__(self) -> str:
        return f"Store({redact_dsn(self.dsn)!r}, schema={self.schema!r})"

    def _new_pool(self) -> psycopg_pool.ConnectionPool[Any]:
        return make_pool(self.dsn, self.options, self._configure, self._pool_size,
                         self._pool_name)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, timeout: float = 10.0) -> None:
        """Open the pool and wait for a first connection, or raise a clear error."""
        with translated():
            if self._own_pool:
                # A direct first connection says precisely what is wrong (the pool would not),
                # and whether a pooler stands between us and the database.
                with connect(
                    self.dsn, self.schema, self.options, timeout=timeout, configured=False
                ) as first:
                    self.pooling = detect_pooling(first, redact_dsn(self.dsn))
                log.info(
                    "%s",
                    pooling_note(self.pooling, bool(self.listen_dsn), self.poll_seconds),
                    extra={"action": "connect"},
                )
                try:
                    self.pool.open(wait=True, timeout=timeout)
                except BaseException:
                    # psycopg_pool closes a pool whose first fill timed out, for good: the next
                    # open() (a retry while the database is away) needs a new one.
                    self.pool.close(timeout=0)
                    self.pool = self._new_pool()
                    raise
                self._opened = True
            with self.pool.connection(timeout=timeout) as conn:
                conn.execute(query("db_now"))

    def close(self) -> None:
        if self._own_pool:
            self.pool.close(timeout=self._remaining(5.0))

    def give_up_at(self, deadline: float) -> None:
        """From now on no wait for a connection, and no statement, lasts past `deadline`
        (time.monotonic()): a stopping agent must not hang on a database or a pooler that is
        away or paused."""
        self._give_up_at = deadline

    def _remaining(self, timeout: float) -> float:
        if self._give_up_at is None:
            return timeout
        return max(0.1, min(timeout, self._give_up_at - time.monotonic()))

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Every new pooled connection: its settings (unless a pooler would not keep them),
        and which database it reached (a failover shows here first)."""
        conn.autocommit = True
        if self.pooling == "direct":
            configure(conn, self.schema, self.options)
            self.identity.observe(read_identity(conn))
            return
        conn.prepare_threshold = None  # a pooler shares server sessions: nothing prepared
        with conn.transaction():
            self._settings_for_this_transaction(conn)
            self.identity.observe(read_identity(conn))

    def _settings_for_this_transaction(self, conn: psycopg.Connection[Any]) -> None:
        configure(conn, self.schema, self.options, local=True)

    @contextmanager
    def connection(self, timeout: float = 10.0) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection with claimsched's settings; errors translated.

        Behind a pooler the settings hold for one transaction only: the block then runs in one
        transaction that sets them first (a `conn.transaction()` inside it is a savepoint).
        That costs BEGIN and COMMIT round trips; a pipeline would save them, but psycopg ends
        its implicit transaction at a nested transaction() and has no rowcount before sync."""
        timeout = self._remaining(timeout)
        if not self._opened:
            self.open(timeout)
        with (
            translated(),
            self.pool.connection(timeout=timeout) as conn,
            cut_off_at(conn, self._give_up_at),
        ):
            if self.pooling == "direct":
                yield conn
            else:
                with conn.transaction():
                    self._settings_for_this_transaction(conn)
                    yield conn

    def direct(self, options: SessionOptions | None = None) -> psycopg.Connection[Any]:
        """A fresh connection outside the pool (migrations, maintenance, listening)."""
        configured = self.pooling == "direct"
        return connect(self.dsn, self.schema, options or self.options, configured=configured)

    def _unhurried(self) -> psycopg.Connection[Any]:
        """For migrations and maintenance: they wait for locks and may take long, by design."""
        return self.direct(dataclasses.replace(self.options, statement_timeout=0, lock_timeout=0))

    def db_now(self) -> datetime:
        with self.connection() as conn:
            return conn.execute(query("db_now")).fetchone()[0]  # type: ignore[index,no-any-return]

    def listener(self, agent_id: str | None = None) -> Listener | Poller:
        """Notifications: LISTEN on listen_dsn if set, else on a direct connection; behind a
        pooler without listen_dsn (LISTEN through it never hears anything), a poll."""
        listen_dsn = self.listen_dsn
        if listen_dsn:
            return Listener(
                lambda: connect(listen_dsn, self.schema, self.options, configured=False),
                self.schema,
                must_be_direct=True,
            )
        if self.pooling == "direct":
            return Listener(self.direct, self.schema)
        return Poller(lambda: self.claims.poll(agent_id), self.poll_seconds)
