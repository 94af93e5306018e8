"""The handle a handler gets: what occurrence it runs, whether it still owns it, and effects."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from ..logs import AgentLog
from ..records import Lease
from .effects import Effects, idempotency_key

T = TypeVar("T")


class _FromLease(Generic[T]):
    """A read-only attribute of a run that its lease holds (the lease never changes)."""

    def __init__(self, read: Callable[[Lease], T]) -> None:
        self._read = read

    def __get__(self, run: Run, owner: type[Run] | None = None) -> T:
        return self._read(run.lease)

    def __set__(self, run: Run, value: object) -> None:
        raise AttributeError("read-only: the run's lease holds it")


class Run:
    """One attempt at one occurrence of a job, owned by this agent while its lease holds.

    `run.lost` is set when the lease is lost (reclaimed, replaced, past max_runtime, handed off
    at shutdown, or a receipt refused): the handler should stop, and `effect()`/`once()` raise
    `LeaseLost`. A handler that ends by raising once `run.lost` is set (LeaseLost, or its own
    exception) is fenced out, not failed: the run goes back for its next attempt (up to
    max_attempts), which finishes the work. A handler that returns has done its job.
    """

    def __init__(self, lease: Lease, effects: Effects, agent_id: str) -> None:
        self._effects = effects
        self._lease = lease
        self.agent_id = agent_id
        self.lost: threading.Event = effects.lost  # set: stop; effects are refused from then on

    @functools.cached_property
    def log(self) -> AgentLog:
        """A logger whose lines name this run (made when first used: most runs log nothing)."""
        lease = self._lease
        return AgentLog(
            logging.getLogger("claimsched.run"),
            {
                "agent": self.agent_id,
                "job": lease.job_name,
                "fire_time": lease.fire_time.isoformat(),
                "attempt": lease.attempt,
            },
        )

    @property
    def lease(self) -> Lease:
        return self._lease

    job_name = _FromLease(lambda lease: lease.job_name)
    fire_time = _FromLease(lambda lease: lease.fire_time)
    attempt = _FromLease(lambda lease: lease.attempt)
    run_id = _FromLease(lambda lease: lease.id)
    kind = _FromLease(lambda lease: lease.kind)  # 'scheduled', 'manual' (trigger) or 'backfill'

    def effect(self, key: str, conn: Any = None) -> bool:
        """Record the receipt for side effect `key`: True only the first time for this occurrence.

        With `conn` (a psycopg connection in a transaction): **exactly once** for a write to
        your own database. The receipt joins that transaction, so your write and its receipt
        commit together or not at all; if the run was fenced out meanwhile, the commit fails.

        Without `conn`: **at most once** (the same as `at_most_once(key)`). The receipt commits
        before you act, so a crash between the receipt and the side effect loses the effect for
        good. For an external call that must happen, use `once()` with `idempotency_key()`.

        Raises LeaseLost when this run no longer owns its occurrence.
        """
        return self._effects.record(key, conn)

    def at_most_once(self, key: str) -> bool:
        """True at most once per occurrence, committed before you act: a crash after it loses
        the effect (never repeats it). For effects that may be skipped but never doubled."""
        return self._effects.record(key, None)

    @contextmanager
    def once(self, key: str) -> Iterator[bool]:
        """`with run.once(key) as first:` — the receipt commits only if the block succeeds.

        **At least once** for the block: a crash inside it (after an external call, before the
        commit) runs it again in the next attempt. Pass `idempotency_key(key)` to the external
        API so that it drops the repeat: together, the effect happens exactly once. The receipt
        is held while the block runs, so no other attempt can take the occurrence over
        meanwhile; keep the block shorter than the lease.
        """
        with self._effects.once(key) as first:
            yield first

    def idempotency_key(self, key: str) -> str:
        """A stable key for (job, fire time, `key`): the same in every attempt and replica, for
        external APIs that deduplicate requests (an `Idempotency-Key` header, a message id)."""
        return idempotency_key(self.job_name, self.fire_time, key)

    def __repr__(self) -> str:
        return (
            f"Run(job={self.job_name!r}, fire_time={self.fire_time.isoformat()}, "
            f"attempt={self.attempt}, lost={self.lost.is_set()})"
        )
