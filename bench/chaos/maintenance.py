"""Maintenance during a storm: `claimsched maintain` run again and again beside the agents (and
once at the end), each run checked to leave every finished run as it was, and, when the storm
asks for it, this month's partition lapsed under them (lapse_partition).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Protocol

import psycopg

from claimsched.db import Store

from .config import ChaosConfig


class Maintained(Protocol):
    """What maintenance uses of a running storm (storm.ChaosRun)."""

    dsn: str
    scope: dict[str, str]
    stop: threading.Event
    migrated: threading.Event  # set once the schema is this release's
    cfg: ChaosConfig
    notes: Counter[str]

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]: ...

    def violation(self, text: str) -> None: ...


class Maintenance:
    """Runs maintenance concurrently with a storm; keeps what it did (`counts`) and every
    finished run it saw (`finished_seen`), which must be the same at the end."""

    def __init__(self, fleet: Maintained, waits: list[float]) -> None:
        self.fleet = fleet
        self.waits = waits  # seconds between runs, from the plan
        self.counts: Counter[str] = Counter()
        self.finished_seen: dict[int, tuple[Any, ...]] = {}
        self._lock = threading.Lock()

    def lapse(self) -> None:
        if lapse_partition(self.fleet.dsn):
            self.fleet.notes["partition_lapses"] += 1

    def finished_rows(self) -> dict[int, tuple[Any, ...]]:
        rows = self.fleet.query(
            "SELECT id, job_name, fire_time, kind, status, claimed_by, attempt, started_at, "  # noqa: S608
            f"finished_at, error, orphan_count FROM {self.fleet.scope['runs']} "
            "WHERE status IN ('done', 'skipped') OR (status = 'failed' AND retry_at IS NULL)"
        )
        return {row[0]: row for row in rows}

    def once(self, why: str) -> None:
        dsn = psycopg.conninfo.make_conninfo(
            self.fleet.dsn, options="-c claimsched_test.actor=maintenance"
        )
        try:
            before = self.finished_rows()
            summary = Store(dsn).admin.maintain()
            after = self.finished_rows()
        except Exception as exc:
            self.counts["failed"] += 1
            self.counts[f"failed: {type(exc).__name__}"] += 1
            return
        self.counts["runs"] += 1
        self.counts["partitions_created"] += len(summary.partitions_created)
        for rid, row in before.items():
            if after.get(rid) != row:
                self.fleet.violation(
                    f"history changed by maintenance ({why}): {row} became {after.get(rid)}"
                )
        with self._lock:
            for rid, row in after.items():
                self.finished_seen.setdefault(rid, row)

    def run(self) -> None:
        for wait in self.waits:
            if self.fleet.stop.wait(wait):
                return
            if self.fleet.cfg.lapse_partitions:
                try:
                    self.lapse()
                except psycopg.Error:
                    self.counts["lapse_failed"] += 1
                if self.fleet.stop.wait(wait / 2):
                    return
            if self.fleet.migrated.is_set():  # this release's maintenance, on its own schema
                self.once("during the storm")


def lapse_partition(dsn: str) -> bool:
    """Maintenance lapsed: this month's partition is missing, its rows live in the default
    partition (as after months without `claimsched maintain`). Done atomically, under an
    exclusive lock, so that the agents never see a half-moved table. False if already lapsed."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SET LOCAL claimsched_test.actor = 'harness-lapse'")
        conn.execute("LOCK TABLE claimsched.job_runs IN ACCESS EXCLUSIVE MODE")
        month = conn.execute("SELECT date_trunc('month', now())").fetchone()[0]  # type: ignore[index]
        name = f"job_runs_p{month:%Y%m}"
        part = psycopg.sql.Identifier("claimsched", name)
        if not conn.execute("SELECT to_regclass(%s)", [f"claimsched.{name}"]).fetchone()[0]:  # type: ignore[index]
            return False
        conn.execute(
            psycopg.sql.SQL("ALTER TABLE claimsched.job_runs DETACH PARTITION {}").format(part)
        )
        conn.execute(
            psycopg.sql.SQL(
                "INSERT INTO claimsched.job_runs OVERRIDING SYSTEM VALUE SELECT * FROM {}"
            ).format(part)
        )
        conn.execute(psycopg.sql.SQL("DROP TABLE {}").format(part))
    return True
