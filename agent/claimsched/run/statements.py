"""The store's statements that the run services send, in one agent's name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..db import Claims
from ..plan.handlers import Handlers
from ..records import Completion, Housekeeping, Lease


@dataclass(frozen=True)
class Statements:
    """The heartbeat, completion and housekeeping statements of agent `agent_id`, whose jobs
    are those `handlers` holds and whose presence row says `presence`."""

    claims: Claims
    agent_id: str
    handlers: Handlers[Any]
    presence: dict[str, Any]

    def heartbeat(self, leases: Sequence[Lease]) -> set[int]:
        """Renew leases; returns the ids still owned (the others are lost)."""
        return self.claims.heartbeat(self.agent_id, leases)

    def complete(self, done: Sequence[Completion]) -> dict[int, datetime | None]:
        """Record outcomes; returns {run id: retry_at} for the ones that were still owned."""
        return self.claims.complete(self.agent_id, done)

    def housekeeping(self, listed: bool) -> Housekeeping:
        """Presence, reaper and max_runtime in one statement; with the job list when `listed`
        (else the agent's row keeps the list it has)."""
        return self.claims.housekeeping(
            self.agent_id, self.handlers.names if listed else None, self.presence)
