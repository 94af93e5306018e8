"""Side effects of one run, made idempotent by receipts keyed (key, job, fire time)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from ..errors import LeaseLost
from ..records import Lease


class ReceiptBook(Protocol):
    """The store's receipts: each answer is (owned, inserted)."""

    def record(
        self, agent_id: str, lease: Lease, entity: str, conn: Any = None
    ) -> tuple[bool, bool]: ...

    def hold(
        self, agent_id: str, lease: Lease, entity: str
    ) -> AbstractContextManager[tuple[bool, bool]]: ...


class Effects:
    """The receipts of one run: a receipt is written only while the run owns its occurrence.

    `lost` is the run's lost flag: once it is set (the lease ran out by the local watchdog, was
    taken over or handed back, or the database refused a receipt) nothing is asked of the
    database; every receipt is refused.
    """

    def __init__(self, book: ReceiptBook, agent_id: str, lease: Lease) -> None:
        self._book = book
        self._agent_id = agent_id
        self._lease = lease
        self.lost = threading.Event()

    def record(self, key: str, conn: Any = None) -> bool:
        if self.lost.is_set():
            raise self._lost(f"effect {key!r}")
        owned, inserted = self._book.record(self._agent_id, self._lease, key, conn)
        if not owned:
            raise self._lost(f"effect {key!r}")
        return inserted

    @contextmanager
    def once(self, key: str) -> Iterator[bool]:
        if self.lost.is_set():
            raise self._lost(f"once({key!r})")
        with self._book.hold(self._agent_id, self._lease, key) as (owned, inserted):
            if not owned:
                raise self._lost(f"once({key!r})")
            yield inserted

    def _lost(self, what: str) -> LeaseLost:
        """The run no longer owns its occurrence: it is lost (the handler should stop, and
        whatever it raises now gives the run back), and `what` was refused."""
        self.lost.set()
        lease = self._lease
        return LeaseLost(
            f"lease lost for {lease.job_name} at {lease.fire_time.isoformat()} "
            f"(attempt {lease.attempt}): {what} refused"
        )


def idempotency_key(job_name: str, fire_time: datetime, key: str) -> str:
    """`claimsched-` and 40 hex digits of SHA-256 over (job, fire time in UTC, key): stable
    across attempts, replicas and releases, and no longer than most APIs accept."""
    text = "\x1f".join((job_name, fire_time.astimezone(UTC).isoformat(), key))
    return "claimsched-" + hashlib.sha256(text.encode()).hexdigest()[:40]
