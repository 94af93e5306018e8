"""`claimsched status JOB`: one line on whether the job is healthy (its last due occurrence
happened, none is late, a live agent handles it), and an exit code a cron-style health check
can use (0 healthy, 2 not, 1 could not tell)."""

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


def handled(dsn: str, job: str, agent: str = "a1", alive: bool = True) -> None:
    """A presence row of an agent with a handler for `job`: live, or stopped."""
    sql(dsn, "INSERT INTO agents (agent_id, hostname, handlers, version, last_seen, stopped_at) "
             "VALUES (%s, 'h', %s, 't', now(), CASE WHEN %s THEN NULL ELSE now() END) "
             "ON CONFLICT (agent_id) DO UPDATE SET handlers = agents.handlers || %s",
        [agent, [job], alive, [job]])


def hourly(dsn: str, job: str, *statuses: str, enabled: bool = True,
           agent: bool = True) -> None:
    """An hourly job active for the last three hours, whose newest runs have these statuses
    (oldest first, ending at the newest fire time), handled by a live agent (unless not)."""
    if agent:
        handled(dsn, job)
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
    code, found, line = status(capsys, dsn, "report", "--late-after", "100000")
    assert (code, found["verdict"], found["late"]) == (0, "due", None)
    assert "has no run yet" in line
    code, found, line = status(capsys, dsn, "report", "--late-after", "0")
    assert (code, found["verdict"], found["reasons"]) == (2, "late", ["late"])
    late = found["late"]  # since the first occurrence after it became active, 3 hours ago
    assert late["due"] == found["fire_time"] and late["grace_seconds"] == 0
    assert late["occurrences"] == 4 and 3 * 3600 <= late["seconds"] < 4 * 3600
    assert f"4 occurrences since {late['since']} have no run, the oldest 3 h after its " \
        "fire time (grace 0 s)" in line
    code, found, line = status(capsys, dsn, "report")
    assert found["grace_seconds"] == 300, "hourly: the default grace's cap"
    sql(dsn, "UPDATE job_schedule SET catch_up_window_seconds = 0, lease_seconds = 1, "
             "heartbeat_seconds = 1")
    code, found, line = status(capsys, dsn, "report")
    assert (code, found["verdict"]) == (2, "missed") and "have no run, the oldest" in line


def test_a_job_no_live_agent_handles_is_not_healthy_whatever_its_last_run(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hourly(dsn, "report", "failed", "done", agent=False)
    code, found, line = status(capsys, dsn, "report")
    assert (code, found["verdict"], found["reasons"]) == (2, "done", ["no_live_agent"])
    assert found["live_agents"] == 0 and "; no live agent handles it; " in line
    handled(dsn, "report", "gone", alive=False)  # stopped
    sql(dsn, "INSERT INTO agents (agent_id, hostname, handlers, version, last_seen, "
             "                    ttl_seconds) "
             "VALUES ('killed', 'h', '{report}', 't', now() - interval '10 seconds', 9)")
    code, found, _ = status(capsys, dsn, "report")
    assert (code, found["reasons"]) == (2, ["no_live_agent"]), "a presence that expired"
    handled(dsn, "report")
    code, found, line = status(capsys, dsn, "report")
    assert (code, found["healthy"], found["live_agents"]) == (0, True, 1)
    assert "no live agent" not in line
    sql(dsn, "UPDATE job_schedule SET enabled = false")
    sql(dsn, "DELETE FROM agents")
    code, found, _ = status(capsys, dsn, "report")
    assert (code, found["verdict"]) == (0, "suspended"), "off: nothing to handle"


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
    handled(dsn, "fresh")
    code, found, line = status(capsys, dsn, "fresh")
    assert (code, found["verdict"], found["fire_time"]) == (0, "none", None)
    assert "nothing was due yet" in line


def test_an_unknown_job_is_one_line_and_exit_1(dsn: str, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    assert main(["status", "nope", "--dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err == "claimsched: error: no schedule for job 'nope'\n"
