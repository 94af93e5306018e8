"""`claimsched status JOB`: one line on whether the last due occurrence happened, and an exit
code a cron-style health check can use (0 healthy, 2 not, 1 could not tell)."""

from __future__ import annotations

import json

import pytest

from claimsched.cli import main

from .support import sql


def status(capsys: pytest.CaptureFixture[str], dsn: str, job: str, *more: str
           ) -> tuple[int, dict[str, object], str]:
    code = main(["status", job, "--dsn", dsn, "--json", *more])
    out = capsys.readouterr().out
    line_code = main(["status", job, "--dsn", dsn, *more])
    line = capsys.readouterr().out
    assert line_code == code and line.count("\n") == 1 and line.startswith(f"{job} ")
    return code, json.loads(out), line


def hourly(dsn: str, job: str, *statuses: str, enabled: bool = True) -> None:
    """An hourly job active for the last three hours, whose newest runs have these statuses
    (oldest first, ending at the newest fire time)."""
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule, enabled, source, active_since) "
             "VALUES (%s, '0 * * * *', %s, 'cli', "
             "        date_trunc('hour', now()) - interval '3 hours 1 second')", [job, enabled])
    for back, run_status in enumerate(reversed(statuses)):
        sql(dsn, "INSERT INTO job_runs (job_name, fire_time, status, attempt, started_at) "
                 "VALUES (%s, date_trunc('hour', now()) - make_interval(hours => %s), %s, 1, "
                 "now())", [job, back, run_status])


@pytest.mark.parametrize(
    ("statuses", "verdict", "code"),
    [
        (("failed", "failed", "done"), "done", 0),
        (("done", "done", "failed"), "failed", 2),
        (("done", "running"), "running", 0),
        (("done", "skipped"), "skipped", 0),
    ],
)
def test_status_answers_from_the_last_due_occurrence(
    dsn: str, capsys: pytest.CaptureFixture[str], statuses: tuple[str, ...], verdict: str,
    code: int,
) -> None:
    hourly(dsn, "report", *statuses)
    found_code, found, line = status(capsys, dsn, "report")
    assert (found_code, found["verdict"], found["healthy"]) == (code, verdict, code == 0)
    assert line.startswith(f"report {verdict}; occurrence ")
    newest = sql(dsn, "SELECT max(fire_time) FROM job_runs")[0][0]
    assert found["fire_time"] == newest.isoformat()


def test_an_occurrence_without_a_run_is_due_then_late_then_missed(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hourly(dsn, "report")  # no runs at all; the newest fire time is this hour's
    code, found, _ = status(capsys, dsn, "report", "--late-after", "100000")
    assert (code, found["verdict"]) == (0, "due")
    code, found, line = status(capsys, dsn, "report", "--late-after", "0")
    assert (code, found["verdict"]) == (2, "late") and "has no run yet" in line
    sql(dsn, "UPDATE job_schedule SET catch_up_window_seconds = 0, lease_seconds = 1, "
             "heartbeat_seconds = 1")
    code, found, line = status(capsys, dsn, "report")
    assert (code, found["verdict"]) == (2, "missed") and "has no run;" in line


def test_a_manual_run_is_not_the_schedules_occurrence(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hourly(dsn, "report", "failed")
    sql(dsn, "INSERT INTO job_runs (job_name, fire_time, status, kind) "
             "VALUES ('report', now(), 'done', 'manual')")
    code, found, _ = status(capsys, dsn, "report")
    assert (code, found["verdict"]) == (2, "failed")


def test_suspended_is_healthy_disabled_is_not_and_new_is_nothing_due(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hourly(dsn, "paused", "failed", enabled=False)
    code, found, _ = status(capsys, dsn, "paused")
    assert (code, found["verdict"], found["next_fire"]) == (0, "suspended", None)
    sql(dsn, "UPDATE job_schedule SET source = 'operator', owner = NULL")
    code, found, _ = status(capsys, dsn, "paused")
    assert (code, found["verdict"]) == (2, "disabled")
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule) VALUES ('fresh', '0 0 1 1 *')")
    code, found, line = status(capsys, dsn, "fresh")
    assert (code, found["verdict"], found["fire_time"]) == (0, "none", None)
    assert "nothing was due yet" in line


def test_an_unknown_job_is_one_line_and_exit_1(dsn: str, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    assert main(["status", "nope", "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err == "claimsched: error: no schedule for job 'nope'\n"
