"""A history for the web view's tests: schedules with done, failed, skipped, retried,
running and missing occurrences, a hostile job name and error text, live and stopped agents.

Retried runs have the history cs_reclaim_v2 keeps in job_attempts: each of the fast job's took
two attempts (agent-gone's orphaned, then agent-live's); one nightly run took three (r1's
orphaned, r2's fenced out, r3's done: THREE_ATTEMPTS)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from claimsched.schedule.schedules import parse_schedule

HOSTILE_JOB = "<script>alert(1)</script>"
HOSTILE_ERROR = "<img src=x onerror=alert(2)> failed; see postgresql://app:hunter2@db:5432/app"
PASSWORD = "hunter2"
# Missed fast enough to test: settled after catch-up window 0 + lease 3 s.
QUICK = {"catch_up_window_seconds": 0, "lease_seconds": 3, "heartbeat_seconds": 1}
# The superseded attempts (owner, outcome) of a retried run; its own, last, attempt follows.
RETRIED = (("agent-gone", "orphaned"),)
THREE_ATTEMPTS = (("r1", "orphaned"), ("r2", "fenced_out"))
THREE_OWNERS = ("r1", "r2", "r3")


@dataclass(frozen=True)
class Seeded:
    now: datetime
    run_ids: dict[str, list[int]]  # per job, newest first
    three_attempts: int  # the nightly run that took three attempts (THREE_OWNERS)


def seed(dsn: str) -> Seeded:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        # A row written past the name check (an older schema, a hand edit): shown as text.
        conn.execute("ALTER TABLE job_schedule DROP CONSTRAINT job_schedule_job_name_check")
        _schedule(conn, "nightly", "0 2 * * *", "Europe/Berlin", now - timedelta(days=10))
        _schedule(conn, "fast", "@every 10s", "UTC", now - timedelta(hours=1))
        _schedule(conn, HOSTILE_JOB, "*/5 * * * *", "UTC", now - timedelta(hours=2))
        # Sundays of March at 02:30 in Berlin: each year's last one is the clock change.
        _schedule(conn, "spring", "30 2 * 3 0", "Europe/Berlin", now - timedelta(days=1))
        _schedule(conn, "paused", "0 6 * * 1-5", "America/New_York", now - timedelta(days=3),
                  enabled=False)
        nightly = parse_schedule("0 2 * * *", "Europe/Berlin").between(
            now - timedelta(days=10), now)
        # Newest first: done, done, failed, (missed), done, done at its third attempt, (missed)...
        plan = ["done", "done", "failed", None, "done", "three", None, "done", None, "done"]
        three = 0
        for fire, status in zip(reversed(nightly), plan, strict=False):
            if status == "three":
                three = _run(conn, "nightly", fire, "done", None, owner=THREE_OWNERS[-1],
                             earlier=THREE_ATTEMPTS)
            elif status:
                _run(conn, "nightly", fire, status, "nightly run blew up" if status == "failed"
                     else None)
        fast = parse_schedule("@every 10s").between(now - timedelta(minutes=8), now)
        cycle = ["done", "done", "failed", "skipped", None, "retried", "done"]
        for index, fire in enumerate(reversed(fast)):
            status = "running" if index == 0 else cycle[index % len(cycle)]
            if status == "retried":
                _run(conn, "fast", fire, "done", None, earlier=RETRIED)
            elif status:
                _run(conn, "fast", fire, status, "fast failed" if status == "failed" else None)
        hostile = parse_schedule("*/5 * * * *").between(now - timedelta(hours=1), now)
        _run(conn, HOSTILE_JOB, hostile[-2], "failed", HOSTILE_ERROR)
        _run(conn, HOSTILE_JOB, hostile[-3], "done", None)
        conn.execute(
            "INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt) "
            "SELECT 'mail:' || g, job_name, fire_time, id, 1 "
            "FROM job_runs, generate_series(1, 3) g "
            "WHERE job_name = 'nightly' AND status = 'done' "
            "AND fire_time = (SELECT max(fire_time) FROM job_runs WHERE job_name = 'nightly')")
        conn.execute(
            "INSERT INTO agents (agent_id, hostname, handlers, version, last_seen, stopped_at) "
            "VALUES ('agent-live', 'host-a', '{nightly,fast}', '0.1.0', now(), NULL), "
            "       ('agent-gone', 'host-b', '{nightly}', '0.0.9', now() - interval '1 hour', "
            "        now() - interval '1 hour')")
        ids: dict[str, list[int]] = {}
        for job, run_id in conn.execute(
                "SELECT job_name, id FROM job_runs ORDER BY fire_time DESC"):
            ids.setdefault(job, []).append(run_id)
    return Seeded(now, ids, three)


def _schedule(conn: psycopg.Connection[Any], job: str, expression: str, zone: str,
              since: datetime, enabled: bool = True) -> None:
    conn.execute(
        "INSERT INTO job_schedule (job_name, schedule, time_zone, enabled, source, active_since, "
        "catch_up_window_seconds, lease_seconds, heartbeat_seconds) "
        "VALUES (%s, %s, %s, %s, 'cli', %s, %s, %s, %s)",
        [job, expression, zone, enabled, since, QUICK["catch_up_window_seconds"],
         QUICK["lease_seconds"], QUICK["heartbeat_seconds"]])
    if not enabled:  # the trigger stamps updated_at; suspended since `since`
        conn.execute("ALTER TABLE job_schedule DISABLE TRIGGER job_schedule_active_since")
        conn.execute("UPDATE job_schedule SET updated_at = %s WHERE job_name = %s", [since, job])
        conn.execute("ALTER TABLE job_schedule ENABLE TRIGGER job_schedule_active_since")


def _run(conn: psycopg.Connection[Any], job: str, fire: datetime, status: str,
         error: str | None, owner: str = "agent-live",
         earlier: Sequence[tuple[str, str]] = ()) -> int:
    """A run whose own attempt `owner` holds, after the superseded attempts `earlier` (owner,
    outcome: each lost its lease, 5 s apart), as cs_reclaim_v2 records them."""
    started = fire + timedelta(seconds=1 + 5 * len(earlier))
    row = conn.execute(
        "INSERT INTO job_runs (job_name, fire_time, status, claimed_by, attempt, orphan_count, "
        "started_at, finished_at, error, lease_until) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        [job, fire, status, owner, len(earlier) + 1, len(earlier), started,
         None if status == "running" else started + timedelta(seconds=2), error,
         fire + timedelta(minutes=2) if status == "running" else None]).fetchone()
    assert row is not None
    for attempt, (held_by, outcome) in enumerate(earlier, 1):
        began = fire + timedelta(seconds=1 + 5 * (attempt - 1))
        why = (f"lease expired (claimed by {held_by}, attempt {attempt})" if outcome == "orphaned"
               else f"fenced out (claimed by {held_by}, attempt {attempt}): the lease was lost")
        conn.execute(
            "INSERT INTO job_attempts (job_name, fire_time, attempt, run_id, claimed_by, "
            "started_at, ended_at, outcome, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [job, fire, attempt, row[0], held_by, began, began + timedelta(seconds=4), outcome,
             why])
    return int(row[0])


def seed_dead_fleet(dsn: str, job: str = "tick") -> datetime:
    """`job` runs @every 2s (default catch-up window and lease: nothing of the last minutes is
    missed yet); its agents ran it until a minute ago: one stopped then, the other was
    SIGKILLed and its presence expired. Returns the fire time of its last run."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        conn.execute("INSERT INTO job_schedule (job_name, schedule, source, active_since) "
                     "VALUES (%s, '@every 2s', 'cli', now() - interval '10 minutes')", [job])
        last: datetime = max(row[0] for row in conn.execute(
            "INSERT INTO job_runs (job_name, fire_time, status, claimed_by, attempt, "
            "                      started_at, finished_at) "
            "SELECT %s, t, 'done', 'agent-stopped', 1, t, t "
            "FROM generate_series(date_trunc('minute', now()) - interval '5 minutes', "
            "                     date_trunc('minute', now()) - interval '1 minute', "
            "                     interval '2 seconds') t "
            "RETURNING fire_time", [job]))
        conn.execute(
            "INSERT INTO agents (agent_id, hostname, handlers, version, last_seen, stopped_at, "
            "                    ttl_seconds) "
            "VALUES ('agent-stopped', 'host-c', %(jobs)s, '0.1.0', %(last)s, %(last)s, 9), "
            "       ('agent-killed', 'host-d', %(jobs)s, '0.1.0', %(last)s, NULL, 9)",
            {"jobs": [job], "last": last})
    return last
