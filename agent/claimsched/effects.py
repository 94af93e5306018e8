"""Side effects of one run, made idempotent by receipts keyed (key, job, fire time)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from .errors import LeaseLost
from .records import Lease


class ReceiptBook(Protocol):
    """The store's receipts: each answer is (owned, inserted)."""

    def record(
        self, agent_id: str, lease: Lease, entity: str, conn: Any = None
    ) -> tuple[bool, bool]: ...

    def hold(
        self, agent_id: str, lease: Lease, entity: str
    ) -> AbstractContextManager[tuple[bool, bool]]: ...


class Effects:
    """The receipts of one run: a receipt is written only while the run owns its occurrence."""

    def __init__(self, book: ReceiptBook, agent_id: str, lease: Lease) -> None:
        self._book = book
        self._agent_id = agent_id
        self._lease = lease

    def record(self, key: str, conn: Any = None) -> bool:
        owned, inserted = self._book.record(self._agent_id, self._lease, key, conn)
        if not owned:
            raise self._lost(f"effect {key!r}")
        return inserted

    @contextmanager
    def once(self, key: str) -> Iterator[bool]:
        with self._book.hold(self._agent_id, self._lease, key) as (owned, inserted):
            if not owned:
                raise self._lost(f"once({key!r})")
            yield inserted

    def _lost(self, what: str) -> LeaseLost:
        lease = self._lease
        return LeaseLost(
            f"lease lost for {lease.job_name} at {lease.fire_time.isoformat()} "
            f"(attempt {lease.attempt}): {what} refused"
        )
