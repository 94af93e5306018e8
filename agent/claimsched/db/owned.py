"""The statements the Kubernetes operator sends about the schedules its ClaimSchedules own
(sql/operator.sql): which database it is, write and release a row, read every job's status
counters at once, and turn a trigger annotation into one manual run."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from ..errors import DatabaseConflict, UnknownJob
from ..records import Written
from ..schedule.specs import JobSpec
from .arrays import literal
from .queries import call, query
from .store import Store


class OwnedSchedules:
    """The operator's door to one database: named statements on the store's pool."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def sync(self, spec: JobSpec) -> Written:
        """Write the row of `spec` (whose owner is a ClaimSchedule), unless another owns it."""
        return self.store.schedules.upsert(spec)

    def release(self, owner: str) -> str | None:
        """Disable the row of the deleted ClaimSchedule `owner` and let go of it (the next
        declaration of the job takes it); its history stays. The job released, if any."""
        with self.store.connection() as conn:
            row = conn.execute(query("operator_release_schedule"), {"owner": owner}).fetchone()
        return None if row is None else str(row[0])

    def database(self) -> tuple[str, str]:
        """(system identifier, database name) of the database this store reaches."""
        with self.store.connection() as conn:
            row = conn.execute(query("operator_database")).fetchone()
        assert row is not None
        return str(row[0]), str(row[1])

    def status_rows(self, known: Mapping[str, Any], retention_days: int) -> list[dict[str, Any]]:
        """One row per given job with a schedule row: its counters, latest runs and live
        agents (the columns of sql/operator.sql's operator_status), in one statement. `known`:
        the jobs and, for each, the settled history range counted before (`known_from`,
        `known_to`, None: none) and the history epoch it was counted at (`known_epoch`)."""
        params = {"jobs": literal(known["jobs"]), "known_from": literal(known["known_from"]),
                  "known_to": literal(known["known_to"]), "known_epoch": known["known_epoch"],
                  "retention_days": retention_days}
        with self.store.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query("operator_status"), params).fetchall()

    def trigger(self, job_name: str, trigger_key: str) -> datetime | None:
        """Ask for the manual run of the trigger `trigger_key`: its fire time when new, None
        when that key asked for its run before (by this operator or another one)."""
        params = {"job_name": job_name, "trigger_key": trigger_key}
        with self.store.connection() as conn, conn.transaction():
            row = conn.execute(call("cs_trigger_run"), params).fetchone()
            assert row is not None
            known, keyed, requested = row
            if not known:
                raise UnknownJob(f"no schedule for job {job_name!r}")
            if keyed is None:
                return None
            if requested is None:  # rolls the key back: the next attempt takes a new time
                raise DatabaseConflict(
                    f"job {job_name!r} already has a run at {keyed.isoformat()}: retry")
            conn.execute(query("wake_agents"))
        return requested  # type: ignore[no-any-return]
