"""`claimsched status JOB`, the installed console script, against a real agent process: healthy
(exit 0) while the agent runs the job; once the fleet is gone (stopped with SIGTERM, or
SIGKILLed and its presence expired), not healthy (exit 2) in one line that says why: no live
agent handles the job, and its occurrences are late."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bench.chaos.harness import replicas

from tests.helpers.polling import wait_for

from .support import sql

CLAIMSCHED = Path(sys.executable).parent / "claimsched"
JOB = "tick"
GRACE = ("--late-after", "3")


def status(dsn: str, *more: str) -> tuple[int, str]:
    """The console script's exit code and its standard output."""
    done = subprocess.run([str(CLAIMSCHED), "status", JOB, "--dsn", dsn, *more],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr == "", done.stderr
    return done.returncode, done.stdout


def done_runs(dsn: str) -> int:
    return int(sql(dsn, "SELECT count(*) FROM job_runs WHERE job_name = %s"
                        " AND status = 'done'", [JOB])[0][0])


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_status_is_healthy_while_an_agent_runs_the_job_and_not_once_the_fleet_is_gone(
    dsn: str, tmp_path: Path, stop: signal.Signals
) -> None:
    with replicas(dsn, tmp_path, [{"name": JOB, "schedule": "@every 2s"}]) as group:
        agent = group.start("a1")
        wait_for(lambda: done_runs(dsn) >= 2, "two done runs", log=group.dump)
        code, out = status(dsn)
        assert code == 0, out
        assert out.count("\n") == 1 and out.startswith(f"{JOB} "), out

        agent.signal(stop)
        agent.process.wait(30)
        # A grace of 3 s rather than the default's 10 (tests/unit/test_deadlines.py covers the
        # default): what is shown is the same.
        found = wait_for(lambda: (r := status(dsn, *GRACE))[0] != 0 and "late" in r[1] and r,
                         "status to say the job is late", log=group.dump)
    code, line = found
    assert code == 2
    assert line.count("\n") == 1 and line.startswith(f"{JOB} late"), line
    assert "no live agent handles it" in line, line
    assert "after its fire time" in line, line  # how late
    code, out = status(dsn, "--json", *GRACE)
    report = json.loads(out)
    assert code == 2 and report["healthy"] is False and report["live_agents"] == 0
    assert set(report["reasons"]) == {"late", "no_live_agent"}
    assert report["late"]["seconds"] > report["late"]["grace_seconds"] > 0
