"""What people ask of the database from a terminal: queue manual and backfill runs and follow
them, list recent runs and the agents that said they exist."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row, dict_row

from ..errors import UnknownJob
from ..records import Queued, QueuedRun
from .arrays import arrays
from .connection import Connect
from .queries import call, query


@dataclass(frozen=True)
class RunRow:
    """A run as `claimsched runs` lists it: the run's row, its last attempt, and `superseded`,
    the attempts a later one superseded, oldest first (each a dict of job_attempts' columns
    attempt, claimed_by, started_at, ended_at (ISO 8601 text), outcome and error)."""

    id: int
    job_name: str
    fire_time: datetime
    kind: str
    status: str
    claimed_by: str | None
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    lease_until: datetime | None
    orphan_count: int
    retry_at: datetime | None
    error: str | None
    superseded: list[dict[str, Any]]


@dataclass(frozen=True)
class AgentRow:
    """An agent seen recently, and whether it is alive by its own time-to-live; `api` is the
    version of the agent API it calls."""

    agent_id: str
    hostname: str
    pod: str | None
    namespace: str | None
    handlers: list[str]
    version: str
    api: int
    tzdata: str | None
    started_at: datetime
    last_seen: datetime
    durability: str | None
    alive: bool


class Listings:
    """The statements of the CLI's runs, agents, trigger and backfill."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect

    def request_runs(
        self, job_name: str, fire_times: Sequence[datetime], kind: str
    ) -> list[datetime]:
        """Queue manual or backfill occurrences; returns the fire times that were new."""
        return [queued.fire_time for queued in self.queue_runs(job_name, fire_times, kind)]

    def queue_runs(
        self, job_name: str, fire_times: Sequence[datetime], kind: str
    ) -> list[Queued]:
        """Queue manual or backfill occurrences; returns the runs that were new. Every
        listening agent hears of them (NOTIFY, once they are committed) and takes its share."""
        with self._connect() as conn:
            exists = conn.execute(query("schedule_exists"), {"job_name": job_name}).fetchone()
            if not exists:
                raise UnknownJob(f"no schedule for job {job_name!r}")
            rows = conn.execute(
                call("cs_request_runs"),
                {"job_name": job_name, "fire_times": list(fire_times), "kind": kind},
            ).fetchall()
            conn.execute(query("wake_agents"))
        return [Queued(run_id, job_name, fire_time) for run_id, fire_time in rows]

    def queued_runs(self, queued: Sequence[Queued]) -> list[QueuedRun]:
        """Where these queued runs stand now, in their order (one read, planned anew each
        time as `Claims.unclaimed` is: a plan kept from an emptier table would scan it)."""
        params = arrays(queued, ids="id", fire_times="fire_time")
        with self._connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query("queued_runs"), params, prepare=False).fetchall()
        return [
            QueuedRun(run, row["state"], row["status"], row["attempt"], row["error"])
            for run, row in zip(queued, rows, strict=True)
        ]

    def runs(
        self, job_name: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[RunRow]:
        """Recent runs, newest first, optionally of one job and/or in one status."""
        params = {"job_name": job_name, "status": status, "limit": limit}
        with self._connect() as conn, conn.cursor(row_factory=class_row(RunRow)) as cur:
            return list(cur.execute(query("list_runs"), params))

    def agents(self) -> list[AgentRow]:
        """Agents seen recently, the last seen first."""
        with self._connect() as conn, conn.cursor(row_factory=class_row(AgentRow)) as cur:
            return list(cur.execute(query("list_agents")))
