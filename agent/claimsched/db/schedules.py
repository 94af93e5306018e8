"""The schedules' rows: read them (whole, by name, or only their versions), write a declaration,
suspend, resume and disable a job."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from ..errors import InvalidSpec, UnknownJob
from ..records import Written
from ..schedule.specs import JobSpec, ScheduleRecord
from .connection import Connect
from .queries import call, query

SCHEDULE_BATCH = 1000  # rows per fetch of a full schedule read (Schedules.each)


def spec_json(spec: JobSpec) -> Jsonb:
    """A schedule's row as the jsonb the functions that write one take (sql/functions/)."""
    return Jsonb(spec.row(), dumps=lambda row: json.dumps(row, default=datetime.isoformat))


@dataclass(frozen=True)
class Suspension:
    """A job's row as a suspend or a resume left it."""

    job_name: str
    enabled: bool
    suspend_until: datetime | None
    suspend_reason: str | None
    updated_at: datetime


class Schedules:
    """The statements about job_schedule's rows (the agent, the CLI, the operator)."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect

    def load(self, names: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule, or those of `names` (a name without a row has none)."""
        return list(self.each(names))

    def each(self, names: Collection[str] | None = None) -> Iterator[ScheduleRecord]:
        """`load` one row at a time: every schedule comes from a server-side cursor, so that a
        reader that keeps less than the rows (the agent) never holds all of them."""
        if names is None:
            yield from (ScheduleRecord(**row) for row in self._stream("load_schedules", dict_row))
            return
        with self._connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query("load_schedules_named"), {"names": list(names)})
            yield from (ScheduleRecord(**row) for row in rows)

    def versions(self) -> Iterator[tuple[str, datetime]]:
        """Each schedule's last change (its updated_at), by job, one at a time."""
        yield from self._stream("schedule_versions", tuple_row)

    def _stream(self, name: str, rows: Any) -> Iterator[Any]:
        """The rows of a named query, SCHEDULE_BATCH at a time from a server-side cursor."""
        with self._connect() as conn, conn.transaction(), conn.cursor(
                f"claimsched_{name}", row_factory=rows) as cursor:
            cursor.itersize = SCHEDULE_BATCH
            yield from cursor.execute(query(name))

    def upsert(self, spec: JobSpec) -> Written:
        """Write a code declaration's or the CLI's schedule, unless another owner holds the job
        (then `held_by` names it; see claimsched.ownership)."""
        function = "cs_declare_schedule_v2" if spec.source == "code" else "cs_upsert_schedule"
        with self._connect() as conn:
            row = conn.execute(call(function), {"spec": spec_json(spec)}).fetchone()
        assert row is not None
        return Written.from_row(row, spec.source, spec.owner)

    def suspend(self, job_name: str, until: datetime | None, reason: str | None) -> Suspension:
        """Suspend a job until `until` (it resumes by itself) or until resumed; the row as it
        is now. UnknownJob when there is none; InvalidSpec when a ClaimSchedule owns it."""
        return self._suspension("suspend_schedule",
                                {"job_name": job_name, "until": until, "reason": reason})

    def resume(self, job_name: str) -> Suspension:
        """Resume a job from now on (nothing that fell while suspended runs); the row now."""
        return self._suspension("resume_schedule", {"job_name": job_name})

    def _suspension(self, name: str, params: dict[str, Any]) -> Suspension:
        job = params["job_name"]
        with self._connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query(name), params).fetchone()
            if row is not None:
                return Suspension(**row)
            owner = cur.execute(query("schedule_owner"), {"job_name": job}).fetchone()
        if owner is None:
            raise UnknownJob(f"no schedule for job {job!r}")
        raise InvalidSpec(f"job {job!r} belongs to ClaimSchedule {owner['owner']}: set "
                          "spec.suspend (and suspendUntil, suspendReason) there")

    def disable(self, job_name: str) -> bool:
        """Suspend a job for good (its history stays); whether it was enabled."""
        with self._connect() as conn:
            return conn.execute(query("disable_schedule"), {"job_name": job_name}).rowcount > 0
