"""Effect receipts: the fenced insert that makes a side effect happen once per occurrence."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerrors

from ..conflicts import retry_conflicts
from ..errors import DatabaseConflict
from ..records import Lease
from .connection import Connect, translated
from .queries import call, query


def _params(agent_id: str, lease: Lease, entity: str) -> dict[str, Any]:
    return {
        "run_id": lease.id,
        "fire_time": lease.fire_time,
        "agent_id": agent_id,
        "attempt": lease.attempt,
        "lease_token": lease.lease_token,
        "entity": entity,
        "job_name": lease.job_name,
    }


def _bound_idle(conn: psycopg.Connection[Any], lease: Lease) -> None:
    """A receipt's transaction holds the run's fencing token until it ends: if its process
    freezes, the server ends the transaction after a lease, so a reclaim is never held up
    longer than a lost lease would hold it anyway (the receipt is then not written)."""
    conn.execute(query("bound_idle_transaction"), {"ms": _lease_millis(lease)})


def _lease_millis(lease: Lease) -> str:
    return str(int(lease.lease_seconds * 1000))


class Receipts:
    """Inserts receipts, fenced by the run's lease: (owned, inserted) for every attempt.

    `owned` false means the lease was lost (nothing was written); `inserted` false means the
    receipt existed already (the effect happened before, in this or an earlier attempt).
    """

    def __init__(self, connect: Connect, schema: str) -> None:
        self._connect = connect
        self._schema = schema

    def record(
        self, agent_id: str, lease: Lease, entity: str, conn: Any = None
    ) -> tuple[bool, bool]:
        """In its own transaction, or in `conn`'s (a psycopg connection) when given."""
        params = _params(agent_id, lease, entity)
        if conn is None:
            row = retry_conflicts(lambda: self._alone(params))
        else:  # the caller's transaction: a conflict aborted it, only the caller can retry
            try:
                with translated():
                    row = self._in_transaction(conn, params, lease)
            except DatabaseConflict as exc:
                if isinstance(exc.__cause__, pgerrors.SerializationFailure):
                    # REPEATABLE READ: the run's fencing token changed after the caller's
                    # snapshot (it was reclaimed). Lost; the caller's transaction is aborted.
                    return False, False
                raise
        assert row is not None
        return bool(row[0]), bool(row[1])

    def _alone(self, params: dict[str, Any]) -> Any:
        with self._connect() as own:
            return own.execute(call("cs_effect_v2"), params).fetchone()

    def _in_transaction(
        self, conn: psycopg.Connection[Any], params: dict[str, Any], lease: Lease
    ) -> Any:
        # Two statements on the app's connection, and nothing of its session changed: the
        # transaction's bounds (see _bound_idle; its commit waits as claimsched's own commits
        # do), then the receipt, its function named with our schema.
        conn.execute(query("app_transaction_settings"), {"ms": _lease_millis(lease)})
        return conn.execute(call("cs_effect_v2", self._schema), params).fetchone()

    @staticmethod
    def _in_savepoint(conn: psycopg.Connection[Any], params: dict[str, Any]) -> Any:
        # A savepoint: a lost deadlock rolls back only the insert, which can then be retried.
        with translated(), conn.transaction():
            return conn.execute(call("cs_effect_v2"), params).fetchone()

    @contextmanager
    def hold(self, agent_id: str, lease: Lease, entity: str) -> Iterator[tuple[bool, bool]]:
        """Insert the receipt in a transaction that commits only if the block succeeds."""
        params = _params(agent_id, lease, entity)
        with self._connect() as conn, conn.transaction():
            with translated():
                _bound_idle(conn, lease)
            row = retry_conflicts(lambda: self._in_savepoint(conn, params))
            assert row is not None
            yield bool(row[0]), bool(row[1])
