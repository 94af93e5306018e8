"""The handle a handler gets: what occurrence it runs, whether it still owns it, and effects."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from .effects import Effects
from .logs import AgentLog
from .records import Lease


class Run:
    """One attempt at one occurrence of a job, owned by this agent while its lease holds.

    `run.lost` is set when the lease is lost (reclaimed, replaced, past max_runtime, handed off
    at shutdown): the handler should stop, and `effect()`/`once()` raise `LeaseLost`.
    """

    def __init__(self, lease: Lease, effects: Effects, agent_id: str) -> None:
        self._effects = effects
        self._lease = lease
        self.agent_id = agent_id
        self.lost = threading.Event()
        self.log = AgentLog(
            logging.getLogger("claimsched.run"),
            {
                "agent": agent_id,
                "job": lease.job_name,
                "fire_time": lease.fire_time.isoformat(),
                "attempt": lease.attempt,
            },
        )

    @property
    def lease(self) -> Lease:
        return self._lease

    @property
    def job_name(self) -> str:
        return self._lease.job_name

    @property
    def fire_time(self) -> datetime:
        return self._lease.fire_time

    @property
    def attempt(self) -> int:
        return self._lease.attempt

    @property
    def run_id(self) -> int:
        return self._lease.id

    @property
    def kind(self) -> str:
        """'scheduled', 'manual' (trigger) or 'backfill'."""
        return self._lease.kind

    def effect(self, key: str, conn: Any = None) -> bool:
        """Record the receipt for side effect `key`: True only the first time for this occurrence.

        With `conn` (a psycopg connection in a transaction) the receipt joins that transaction,
        so the app's own write and its receipt commit together. Raises LeaseLost when this run
        no longer owns its occurrence.
        """
        return self._effects.record(key, conn)

    @contextmanager
    def once(self, key: str) -> Iterator[bool]:
        """`with run.once(key) as first:` — the receipt commits only if the block succeeds."""
        with self._effects.once(key) as first:
            yield first

    def __repr__(self) -> str:
        return (
            f"Run(job={self.job_name!r}, fire_time={self.fire_time.isoformat()}, "
            f"attempt={self.attempt}, lost={self.lost.is_set()})"
        )
