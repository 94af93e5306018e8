"""`claimsched trigger` and `claimsched backfill`, run as a user runs them (the installed
console script): they print the runs they queued, warn when no live agent handles the job, and
with --wait follow the runs to their end."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from claimsched import Agent, Run
from claimsched.db import Store
from claimsched.schedule.specs import job_spec

from .support import runs, sql

COMMAND = Path(sys.executable).with_name("claimsched")  # the console script pip installed


def claimsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    assert COMMAND.exists(), f"{COMMAND} is missing: pip install -e . first"
    return subprocess.run([str(COMMAND), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.fixture
def report(store: Store) -> str:
    """A daily job with no agent yet."""
    store.schedules.upsert(job_spec(job_name="report", schedule="@daily", source="cli"))
    return "report"


@pytest.fixture
def failing() -> set[datetime]:
    """The fire times whose runs the agent's handler fails."""
    return set()


@pytest.fixture
def agent(dsn: str, report: str, failing: set[datetime]) -> Iterator[Agent]:
    """A live agent for `report` (housekeeping at its default period)."""
    made = Agent(dsn, agent_id="a", shutdown_grace_seconds=2)

    @made.job(report)
    def handle(run: Run) -> None:
        if run.fire_time in failing:
            raise ValueError("the ledger is locked")

    made.start()
    yield made
    made.stop()


def utc(instant: datetime) -> str:
    """An instant as the CLI prints it."""
    return instant.astimezone(UTC).isoformat()


def midnight(store: Store, days_ago: int) -> datetime:
    """Midnight (UTC) `days_ago` days before today's."""
    today = store.db_now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days_ago)


def days_ago(store: Store, first: int, last: int) -> tuple[str, str]:
    """FROM and TO (ISO 8601) spanning the midnights (UTC) `first` to `last` days ago."""
    return utc(midnight(store, first)), utc(midnight(store, last))


def test_trigger_and_backfill_print_the_runs_they_queued_and_warn_without_a_live_agent(
    dsn: str, store: Store, report: str
) -> None:
    done = claimsched("trigger", report, "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    ((run_id, fire_time),) = sql(dsn, "SELECT id, fire_time FROM job_runs")
    assert lines(done.stdout) == [
        f"triggered report: run {run_id} at {utc(fire_time)} (pending)"]
    assert lines(done.stderr) == ["claimsched: warning: no live agent handles job 'report'; "
                                  "its queued runs wait until one starts"]

    start, end = days_ago(store, 3, 1)
    done = claimsched("backfill", report, start, end, "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    queued = sql(dsn, "SELECT id, fire_time FROM job_runs WHERE kind = 'backfill' "
                      "ORDER BY fire_time")
    assert len(queued) == 3
    out = done.stdout
    for run_id, fire_time in queued:
        assert any(line.split() == [str(run_id), report, utc(fire_time)]
                   for line in lines(out)), out
    assert lines(out)[-1] == "backfill report: 3 queued, 0 already ran or are queued"
    assert "no live agent handles job 'report'" in done.stderr
    assert len(lines(done.stderr)) == 1

    done = claimsched("backfill", report, start, end, "--dsn", dsn, "--json")
    assert json.loads(done.stdout)["runs"] == [] and json.loads(done.stdout)["queued"] == 0


def test_a_live_agent_silences_the_warning_and_wait_exits_0_once_every_run_is_done(
    dsn: str, store: Store, report: str, agent: Agent
) -> None:
    start, end = days_ago(store, 5, 1)
    done = claimsched("backfill", report, start, end, "--dsn", dsn, "--wait", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)  # one document: the final state
    assert result["outcome"] == "done" and result["queued"] == 5
    assert result["counts"] == {"pending": 0, "running": 0, "done": 5, "failed": 0, "gone": 0}
    assert [(r["id"], r["status"]) for r in result["runs"]] == [
        (r["id"], "done") for r in runs(dsn, report) if r["kind"] == "backfill"]

    done = claimsched("trigger", report, "--dsn", dsn, "--wait")
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout)[0].startswith("triggered report: run ")
    assert lines(done.stdout)[-1].startswith("report: all 1 queued run(s) done in ")


def test_wait_exits_non_zero_naming_the_run_that_failed_for_good(
    dsn: str, store: Store, report: str, failing: set[datetime], agent: Agent
) -> None:
    start, end = days_ago(store, 3, 1)
    bad = midnight(store, 2)
    failing.add(bad)
    done = claimsched("backfill", report, start, end, "--dsn", dsn, "--wait", "--json")
    assert done.returncode == 1
    ((bad_id,),) = sql(dsn, "SELECT id FROM job_runs WHERE fire_time = %s", [bad])
    assert lines(done.stderr) == [
        f"claimsched: error: run {bad_id} of report at {utc(bad)} failed for good "
        f"(attempt 1): ValueError: the ledger is locked ({done_count(done.stdout)} of 3 done)"]
    result = json.loads(done.stdout)
    assert result["outcome"] == "failed"
    failed = [r for r in result["runs"] if r["state"] == "failed"]
    assert [(r["id"], r["error"]) for r in failed] == [
        (bad_id, "ValueError: the ledger is locked")]


def done_count(out: str) -> int:
    return int(json.loads(out)["counts"]["done"])


def test_wait_times_out_saying_how_many_runs_are_not_done(
    dsn: str, report: str
) -> None:
    done = claimsched("trigger", report, "--dsn", dsn, "--wait", "--timeout", "1")
    assert done.returncode == 1
    assert lines(done.stderr)[-1] == (
        "claimsched: error: timed out after 1 s: 1 of 1 queued run(s) of report not done "
        "(1 pending, 0 running)")
    assert "Traceback" not in done.stderr


def test_a_timeout_without_wait_is_one_clear_line_and_queues_nothing(
    dsn: str, report: str
) -> None:
    done = claimsched("trigger", report, "--dsn", dsn, "--timeout", "5")
    assert done.returncode == 1
    assert lines(done.stderr) == ["claimsched: error: --timeout needs --wait"]
    assert sql(dsn, "SELECT count(*) FROM job_runs") == [(0,)]
