"""The CLI on a real Postgres: tables for people, JSON for scripts, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml

from claimsched.cli import main
from claimsched.db import SCHEMA_VERSION, Store
from claimsched.db.queries import migration_files
from claimsched.records import Completion
from claimsched.schedule.specs import job_spec

from .support import sql

GOOD = """
apiVersion: claimsched.io/v1alpha1
kind: ClaimSchedule
metadata: {name: nightly-report, namespace: shop}
spec: {schedule: "0 2 * * *", timeZone: Europe/Berlin, catchUpPolicy: All}
---
apiVersion: claimsched.io/v1alpha1
kind: ClaimSchedule
metadata: {name: sync}
spec: {schedule: "@every 30s", concurrencyPolicy: Allow}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _apply(
    tmp_path: Path, text: str, dsn: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    path = tmp_path / "schedules.yaml"
    path.write_text(text)
    return run(capsys, "apply", str(path), "--dsn", dsn)


def test_apply_writes_every_claimschedule_and_schedules_lists_next_fire_times(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _apply(tmp_path, GOOD, dsn, capsys)
    assert code == 0 and "nightly-report created" in out
    code, out, _ = run(capsys, "schedules", "--dsn", dsn, "--json")
    rows = {r["job"]: r for r in json.loads(out)}
    assert rows["nightly-report"]["owner"] == "shop/nightly-report"
    assert rows["nightly-report"]["next_local"].endswith(("+01:00", "+02:00"))
    assert rows["nightly-report"]["next_local"][11:16] == "02:00"
    assert rows["sync"]["source"] == "cli"
    code, out, _ = _apply(tmp_path, GOOD, dsn, capsys)
    assert "nightly-report unchanged" in out


def test_schedules_shows_hashed_fields_resolved_for_the_job(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hashed = ("kind: ClaimSchedule\nmetadata: {name: daily_report}\n"
              "spec: {schedule: 'H 2 * * *', timeZone: Europe/Berlin}")
    code, _, err = _apply(tmp_path, hashed, dsn, capsys)
    assert code == 0, err
    code, out, _ = run(capsys, "schedules", "--dsn", dsn, "--json")
    row, = json.loads(out)
    assert (row["schedule"], row["resolved"]) == ("H 2 * * *", "44 2 * * *")
    assert row["next_local"][11:16] == "02:44"
    code, out, _ = run(capsys, "schedules", "--dsn", dsn)
    assert "44 2 * * *" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: ClaimSchedule\nmetadata: {name: x}\nspec: {schedule: 'H(30-10) * * * *'}",
            "minute field 'H(30-10)' has a range that runs backwards",
        ),
        (
            "kind: ClaimSchedule\nmetadata: {name: x}\nspec: {schedule: '61 * * * *'}",
            "minute field '61'",
        ),
        (
            "kind: ClaimSchedule\nmetadata: {name: x}\n"
            "spec: {schedule: '@daily', timeZone: Mars/Base}",
            "unknown time zone 'Mars/Base'",
        ),
        ("kind: ClaimSchedule\nmetadata: {name: x}\nspec: {schedule: '@every 0s'}", "@every"),
        (
            'kind: ClaimSchedule\nmetadata: {name: "x\'; DROP TABLE job_runs; --"}\n'
            "spec: {schedule: '@daily'}",
            "invalid job name",
        ),
        (
            "kind: ClaimSchedule\nmetadata: {name: x}\nspec: {schedule: '@daily', leaseSeconds: 0}",
            "lease_seconds",
        ),
        (
            "kind: ClaimSchedule\nmetadata: {name: x}\nspec: {schedule: '@daily', bogus: 1}",
            "unknown field",
        ),
        ("kind: ClaimSchedule\nmetadata: {name: x\nspec: [", "not valid YAML"),
    ],
)
def test_bad_input_is_one_clear_line_and_writes_nothing(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    code, _, err = _apply(tmp_path, GOOD + "---\n" + text, dsn, capsys)
    assert code == 1 and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert sql(dsn, "SELECT count(*) FROM job_schedule") == [(0,)]


def test_trigger_queues_one_manual_run_and_refuses_unknown_jobs(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(tmp_path, GOOD, dsn, capsys)
    code, out, _ = run(capsys, "trigger", "sync", "--dsn", dsn, "--json")
    assert code == 0 and json.loads(out)["status"] == "pending"
    code, _, err = run(capsys, "trigger", "nope", "--dsn", dsn)
    assert code == 1 and "no schedule for job 'nope'" in err
    code, out, _ = run(capsys, "runs", "--dsn", dsn, "--json")
    assert [(r["job_name"], r["kind"], r["status"]) for r in json.loads(out)] == [
        ("sync", "manual", "pending")
    ]


def test_backfill_queues_the_occurrences_of_a_range_once(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(tmp_path, GOOD, dsn, capsys)
    args = (
        "backfill",
        "nightly-report",
        "2026-03-27T00:00:00Z",
        "2026-03-31T00:00:00Z",
        "--dsn",
        dsn,
        "--json",
    )
    code, out, _ = run(capsys, *args)
    result = json.loads(out)
    queued = result.pop("runs")  # each run queued: id, fire time, status
    assert code == 0 and result == {
        "job": "nightly-report",
        "occurrences": 5,
        "queued": 5,
        "already_present": 0,
    }
    ids = sql(dsn, "SELECT id FROM job_runs ORDER BY fire_time")
    assert [(r["id"],) for r in queued] == ids and {r["status"] for r in queued} == {"pending"}
    code, out, _ = run(capsys, *args)
    assert json.loads(out)["queued"] == 0
    fires = sql(
        dsn,
        "SELECT to_char(fire_time AT TIME ZONE 'UTC', 'MM-DD HH24:MI') FROM job_runs ORDER BY 1",
    )
    # 02:00 Berlin: CET until the 29th, whose 02:00 falls in the DST gap and runs at 03:00 CEST.
    assert fires == [
        ("03-27 01:00",),
        ("03-28 01:00",),
        ("03-29 01:00",),
        ("03-30 00:00",),
        ("03-31 00:00",),
    ]


def test_backfill_refuses_a_range_that_ends_in_the_future_and_queues_nothing(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The future is not backfilled: its occurrences run at their time (the 05:00 occurrence
    must not run at 04:06). "Now" is the database's clock."""
    _apply(tmp_path, GOOD, dsn, capsys)
    sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '1 day'")
    start = sql(dsn, "SELECT to_char(now() - interval '1 hour', 'YYYY-MM-DD\"T\"HH24:MI:SSOF')")
    end = sql(dsn, "SELECT to_char(now() + interval '1 hour', 'YYYY-MM-DD\"T\"HH24:MI:SSOF')")
    code, out, err = run(capsys, "backfill", "sync", start[0][0], end[0][0], "--dsn", dsn)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "backfill: TO" in err and "is in the future" in err
    assert sql(dsn, "SELECT count(*) FROM job_runs") == [(0,)]


def test_migrate_and_maintain_report_what_they_did(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "migrate", "--dsn", empty_dsn, "--json")
    every = [version for version, _, _ in migration_files()]  # every migration, in order
    assert code == 0 and json.loads(out)["applied"] == every and every[-1] == SCHEMA_VERSION
    code, out, _ = run(capsys, "migrate", "--dsn", empty_dsn, "--json")
    assert json.loads(out)["applied"] == []
    code, out, _ = run(capsys, "maintain", "--dsn", empty_dsn, "--json")
    assert code == 0 and "partitions_created" in json.loads(out)


def test_an_unreachable_database_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = "postgresql://app:s3cret@127.0.0.1:1/nowhere"
    code, _, err = run(capsys, "runs", "--dsn", dsn, "--connect-timeout", "1")
    assert code == 1 and "cannot reach the database" in err
    assert "s3cret" not in err and err.count("\n") == 1


def test_a_wrong_password_is_one_line(server_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS cli_pw")
        conn.execute("CREATE ROLE cli_pw LOGIN PASSWORD 'right'")
        hba = conn.execute("SHOW hba_file").fetchone()[0]  # type: ignore[index]
    original = Path(hba).read_text()
    Path(hba).write_text("host all cli_pw 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        info = psycopg.conninfo.conninfo_to_dict(server_dsn)
        dsn = f"postgresql://cli_pw:wrong@{info['host']}:{info['port']}/postgres"
        code, _, err = run(capsys, "runs", "--dsn", dsn)
        assert code == 1 and "refused the login" in err and "wrong" not in err.split("login")[0]
        assert err.count("\n") == 1
    finally:
        Path(hba).write_text(original)
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def test_the_installed_command_prints_no_traceback_on_error() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "claimsched.cli",
            "runs",
            "--dsn",
            "host=127.0.0.1 port=1",
            "--connect-timeout",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("claimsched: error:") and "Traceback" not in result.stderr


def test_a_schema_without_claimscheds_tables_says_which_schemas_have_them(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --schema must not send the user to `migrate` (which would create empty tables
    in the wrong schema) without saying where claimsched's tables are."""
    code, out, err = run(capsys, "runs", "--schema", "claimsced", "--dsn", dsn)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "schema claimsced has no claimsched tables" in err
    assert "schema claimsched of this database has them: pass --schema claimsched" in err


def test_listings_read_like_kubectl_with_wide_json_and_yaml(
    dsn: str, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table of what matters, times as ages; `-o wide` adds columns and full times;
    `-o json` (or --json) and `-o yaml` for scripts."""
    store.schedules.upsert(job_spec(job_name="nightly", schedule="@daily"))
    store.listings.request_runs("nightly", [store.db_now()], "manual")
    (lease,) = store.claims.reclaim("r1", ["nightly"], 1)
    store.claims.complete("r1", [Completion(lease, "failed", "ValueError: boom " + "x" * 300)])
    code, out, _ = run(capsys, "runs", "--dsn", dsn)
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["ID", "JOB", "NAME", "FIRE", "TIME", "STATUS", "ATTEMPT", "RAN",
                              "BY", "FINISHED", "AT"]
    assert "nightly" in row and "failed" in row and "r1" in row and " ago" in row
    assert "boom" not in row and len(row) < 120
    _, out, _ = run(capsys, "runs", "--dsn", dsn, "-o", "wide")
    header, row = out.splitlines()
    assert "ERROR" in header and "boom" in row and lease.fire_time.isoformat()[:19] in row
    _, out, _ = run(capsys, "runs", "--dsn", dsn, "-o", "yaml")
    (listed,) = yaml.safe_load(out)
    assert (listed["job_name"], listed["status"], listed["ran_by"]) == ("nightly", "failed", "r1")
    _, out, _ = run(capsys, "runs", "--dsn", dsn, "-o", "json")
    assert json.loads(out)[0]["id"] == listed["id"]
    _, out, _ = run(capsys, "agents", "--dsn", dsn)
    assert out.strip() == "No agents found."
