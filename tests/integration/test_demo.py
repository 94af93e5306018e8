"""`claimsched demo`, run as a user would: the verdict holds and nothing is left behind."""

from __future__ import annotations

import http.client
import json
import os
import re
import selectors
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from claimsched.db import RunRow, Store
from claimsched.schedule.schedules import parse_schedule
from claimsched.tools.demo import app
from claimsched.tools.demo.fleet import Fleet
from claimsched.tools.demo.observations import LogTail, Observations, effects_by_key
from claimsched.tools.demo.runner import DEMO_SCHEMA, prepare
from claimsched.tools.demo.verdict import verdict
from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process
from tests.helpers.polling import wait_for


def _demo(*args: str, cwd: Path, timeout: float = 240) -> tuple[int, dict[str, Any] | None, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
    result = subprocess.run(
        [sys.executable, "-m", "claimsched.cli", "demo", "--json", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )
    summary = json.loads(result.stdout) if result.stdout.strip() else None
    return result.returncode, summary, result.stderr


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line the process writes to stdout, waiting at most `timeout` seconds."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            pytest.fail(f"no output from the demo within {timeout}s")
    return process.stdout.readline()


def _get_json_or_none(port: int, path: str) -> Any:
    """The JSON at `path`, or None while nothing listens there yet."""
    try:
        return _get_json(port, path)
    except OSError:
        return None


def _get_json(port: int, path: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        assert response.status == 200, (path, response.status)
        return json.loads(response.read())
    finally:
        conn.close()


def _assert_held(code: int, summary: dict[str, Any] | None, stderr: str) -> dict[str, Any]:
    assert summary is not None, stderr[-3000:]
    assert summary["held"] and code == 0, (summary["reasons"], stderr[-3000:])
    assert summary["effects"]["duplicates"] == 0
    assert summary["occurrences"]["missed"] == 0
    assert summary["occurrences"]["expected"] == summary["occurrences"]["seen"] > 0
    assert summary["orphans_reclaimed"] >= 1
    assert summary["fenced"]["completions_refused"] >= 1
    assert summary["fenced"]["effects_refused"] >= 1
    killed, paused = summary["faults"]["killed"], summary["faults"]["paused"]
    assert killed and paused and killed["replica"] != paused["replica"]
    return summary


def _gone(pid: int) -> bool:
    """No such process (a zombie waiting for a reaper that is not ours counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return all(_gone(pid) for pid in _pids_in_group(pgid))


def _pids_in_group(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def _cmdlines_mentioning(text: str) -> list[str]:
    hits = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and not _gone(int(entry.name)):
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                hits.append(f"{entry.name}: {cmdline}")
    return hits


@pytest.mark.slow
def test_the_demo_shows_exactly_once_and_leaves_nothing_behind(tmp_path: Path) -> None:
    code, summary, stderr = _demo("--duration", "5", cwd=tmp_path)
    summary = _assert_held(code, summary, stderr)
    assert summary["database"]["embedded"] is True
    assert summary["replicas"] == 3 and summary["faults"]["restarted"]
    processes = summary["processes"]
    assert processes["postgres"] and _gone(processes["postgres"])
    for name, pid in processes["replicas"].items():
        assert _gone(pid) and _group_gone(pid), f"replica {name} (pid {pid}) is still there"
    data_dir = summary["database"]["data_dir"]
    assert not Path(data_dir).exists()
    assert _cmdlines_mentioning(data_dir) == []
    assert "logs" not in summary  # kept only when the verdict fails


@pytest.mark.slow
def test_the_demo_uses_its_own_schema_in_a_given_database(dsn: str, tmp_path: Path) -> None:
    code, summary, stderr = _demo("--dsn", dsn, "--duration", "5", cwd=tmp_path)
    summary = _assert_held(code, summary, stderr)
    assert summary["database"]["embedded"] is False
    assert summary["database"]["schema"] == "claimsched_demo"
    assert all(_gone(pid) for pid in summary["processes"]["replicas"].values())
    with psycopg.connect(dsn, autocommit=True) as conn:
        ours = conn.execute("SELECT count(*) FROM claimsched.job_schedule").fetchone()
        theirs = conn.execute(
            "SELECT count(DISTINCT job_name) FROM claimsched_demo.job_runs").fetchone()
        ledger = conn.execute("SELECT to_regclass('public.demo_ledger')").fetchone()
    assert ours == (0,), "the database's own claimsched schema was not touched"
    assert theirs == (len(app.SCHEDULES),)
    assert ledger == (None,)


def test_the_demo_leaves_a_schema_it_did_not_make_alone(dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA app_jobs")
        conn.execute("CREATE TABLE app_jobs.precious (id int)")
    code, summary, stderr = _demo("--dsn", dsn, "--schema", "app_jobs", cwd=tmp_path, timeout=60)
    assert code == 1 and summary is None
    assert "was not made by the demo" in stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('app_jobs.precious')").fetchone() != (None,)


def test_the_verdict_fails_on_a_duplicate_effect_or_a_missed_occurrence() -> None:
    since = datetime(2030, 1, 1, tzinfo=UTC)
    end = since + timedelta(seconds=10)
    windows = {app.REPORT: (parse_schedule("@every 2s"), since)}
    fire_times = parse_schedule("@every 2s").between(since, end)
    runs = [RunRow(id=i, job_name=app.REPORT, fire_time=t, kind="scheduled", status="done",
                   claimed_by="r1", attempt=2 if i == 0 else 1, started_at=None,
                   finished_at=None, lease_until=None, orphan_count=1 if i == 0 else 0,
                   retry_at=None, error=None, superseded=[])
            for i, t in enumerate(fire_times)]
    ledger = [(app.REPORT, t, customer, "r1", 1) for t in fire_times for customer in app.CUSTOMERS]
    seen = Observations()
    seen.fenced[(app.REPORT, fire_times[0])].append("r2")

    good = verdict(runs, effects_by_key(ledger), windows, end, seen, True)
    assert good["held"] and good["occurrences"] == {
        **good["occurrences"], "expected": 5, "seen": 5, "missed": 0}

    twice = verdict(runs, effects_by_key([*ledger, ledger[0]]), windows, end, seen, True)
    assert not twice["held"] and twice["effects"]["duplicates"] == 1
    assert twice["checks"]["no_duplicate_effects"] is False

    missed = verdict(runs[1:], effects_by_key(ledger), windows, end, seen, True)
    assert not missed["held"] and missed["occurrences"]["missed"] == 1
    assert missed["occurrences"]["by_job"][app.REPORT]["missed"] == [fire_times[0].isoformat()]


def test_the_replica_table_counts_the_runs_each_replica_starts(dsn: str, tmp_path: Path) -> None:
    """The "runs started" column reads the replicas' logs: a replica's starts must be there."""
    store = Store(dsn, schema=DEMO_SCHEMA, max_size=2)
    store.open()
    fleet = Fleet(dsn, DEMO_SCHEMA, tmp_path)
    try:
        prepare(store, DEMO_SCHEMA)
        replica = fleet.start("r1")
        tail, seen = LogTail("r1", replica.log), Observations()

        def started() -> int:
            for line in tail.read():
                seen.learn(line)
            return seen.starts["r1"]

        wait_for(started, timeout=20, what=f"a run start in r1's log ({replica.log})")
        fleet.stop(grace=5)
        started()
        done = [r for r in store.listings.runs(limit=1000) if r.status == "done"]
    finally:
        fleet.kill()
        store.close()
    assert done and all(r.claimed_by == "r1" for r in done)
    assert seen.starts["r1"] >= len(done)
    assert {key for key, owners in seen.owners.items() if owners.get(1) == "r1"} >= {
        (r.job_name, r.fire_time) for r in done if r.attempt == 1
    }


@pytest.mark.slow
def test_the_kept_demo_database_shows_the_kill_in_the_web_view_until_sigterm(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
    errors = tmp_path / "demo.stderr"
    with errors.open("w") as stderr:
        demo = subprocess.Popen(
            [sys.executable, "-m", "claimsched.cli", "demo", "--json", "--duration", "8",
             "--keep"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    try:
        line = _first_line(demo, timeout=200)
        assert line, errors.read_text()[-3000:]
        hint = wait_for(lambda: re.search(r"watch it in a browser: (.+)", errors.read_text()),
                        "the demo's hint to run claimsched web", timeout=30, log=errors)
        summary = _assert_held(0, json.loads(line), errors.read_text())
        database = summary["database"]
        assert database["embedded"] and database["kept"]
        # The printed command, as a user pastes it into a shell without the venv activated.
        port = free_port()
        command = [*shlex.split(hint.group(1)), "--bind", f"127.0.0.1:{port}"]
        plain = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        plain["PATH"] = "/usr/bin:/bin"
        web = subprocess.Popen(command, env=plain, cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            overview = wait_for(lambda: _get_json_or_none(port, "/api/schedules"),
                                "the printed claimsched web command to serve", timeout=30)
            killed = summary["faults"]["killed"]
            timeline = _get_json(port, f"/api/schedules/{killed['job']}")["timeline"]
        finally:
            stop_process(web, 10)
        shown = {s["job"]: s["recent"]["counts"] for s in overview["schedules"]}
        assert set(shown) == set(app.SCHEDULES)
        assert all(counts["done"] > 0 for counts in shown.values()), shown
        found = {o["fire_time"]: o for o in timeline["occurrences"]}
        killed_at = datetime.fromisoformat(killed["fire_time"]).astimezone(UTC).isoformat()
        square = found[killed_at]
        # The kill shows as done (its final outcome), retried, first run by the killed replica.
        assert (square["class"], square["retried"]) == ("done", True), square
        owners = square["run"]["owners"]
        assert len(owners) >= 2 and owners[0] == killed["replica"] != owners[-1], square
        assert demo.poll() is None, "--keep: the demo waits after its verdict"
        code = stop_process(demo, 60)
    finally:
        stop_process(demo, 10)  # when the test failed before its own stop
        assert demo.stdout is not None
        demo.stdout.close()
    assert code == 0, "SIGTERM ends the wait; the exit code is the verdict's"
    assert _gone(summary["processes"]["postgres"])
    assert not Path(database["data_dir"]).exists()
    assert _cmdlines_mentioning(database["data_dir"]) == []


def test_keep_is_refused_with_a_dsn_of_ones_own(dsn: str, tmp_path: Path) -> None:
    code, summary, stderr = _demo("--dsn", dsn, "--keep", "5", cwd=tmp_path, timeout=60)
    assert code == 1 and summary is None
    assert "--keep keeps the embedded database up" in stderr and "Traceback" not in stderr
    assert "--schema claimsched_demo" in stderr
