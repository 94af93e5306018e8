"""Suspend with a reason and an end: nothing at or before `suspend_until` runs or is caught up,
and the schedule resumes by itself at that instant, with nobody to flip it back."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from claimsched import Agent
from claimsched.cli import main
from claimsched.db import Store
from claimsched.errors import InvalidSpec
from claimsched.schedule.specs import from_claimschedule, job_spec
from tests.helpers.polling import wait_for

from .support import due, past, runs, sql


def _schedule(store: Store, name: str = "job", **fields: Any) -> None:
    store.schedules.upsert(job_spec(job_name=name, schedule="@every 1s", source="cli", **fields))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")


def test_occurrences_up_to_suspend_until_are_never_claimed(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    sql(store.dsn, "UPDATE job_schedule SET suspend_until = now() - interval '10 seconds'")
    _, results = store.claims.claim("a", due(store, "job", past(20), past(10), past(5)), 4)
    assert [r.outcome for r in results] == ["inactive", "inactive", "claimed"]


def test_lifting_a_suspension_early_never_makes_what_fell_in_it_due(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    sql(store.dsn, "UPDATE job_schedule SET suspend_until = now() - interval '30 seconds'")
    store.schedules.suspend("job", store.db_now() + timedelta(hours=1), "maintenance")
    store.schedules.resume("job")  # an hour early: what fell in the suspension stays unrun
    _, results = store.claims.claim("a", due(store, "job", past(40), past(20), past(5)), 4)
    assert [r.outcome for r in results] == ["inactive", "inactive", "inactive"]
    assert sql(store.dsn, "SELECT enabled, suspend_until, suspend_reason FROM job_schedule") == [
        (True, None, None)]


def test_a_code_declaration_keeps_a_suspension_set_by_the_cli(store: Store) -> None:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s"))
    store.schedules.suspend("job", None, "vendor API down")
    same, changed = (job_spec(job_name="job", schedule=f"@every {n}s") for n in (1, 2))
    assert store.schedules.upsert(same).outcome == "unchanged"
    assert store.schedules.upsert(changed).outcome == "updated"
    assert sql(store.dsn, "SELECT schedule, enabled, suspend_reason FROM job_schedule") == [
        ("@every 2s", False, "vendor API down")]


def test_an_agent_skips_the_suspension_and_wakes_by_itself_when_it_ends(
    dsn: str, store: Store
) -> None:
    agent = Agent(dsn, agent_id="a", housekeeping_seconds=0.3, schedule_refresh_seconds=3600)
    agent.job("tick", schedule="@every 1s", catch_up_policy="All")(lambda run: None)
    try:
        agent.start()
        wait_for(lambda: any(r["status"] == "done" for r in runs(dsn, "tick")),
                 what="a first run")
        until = (store.db_now() + timedelta(seconds=3)).replace(microsecond=0)
        store.schedules.suspend("tick", until, "deploy")
        wait_for(lambda: any(r["fire_time"] > until + timedelta(seconds=1)
                             for r in runs(dsn, "tick")), what="runs after the suspension")
    finally:
        agent.stop()
    fired = [r["fire_time"] for r in runs(dsn, "tick")]
    suspended = [t for t in fired if until - timedelta(seconds=2) < t <= until]
    assert suspended == []  # nothing that fell while suspended ran, nor was caught up
    assert until + timedelta(seconds=1) in fired  # the first occurrence after it ran


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_suspend_and_resume_from_the_cli_show_everywhere(
    dsn: str, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.schedules.upsert(job_spec(job_name="report", schedule="0 * * * *", source="cli"))
    until = (store.db_now() + timedelta(hours=5)).replace(microsecond=0)
    code, out, _ = cli(capsys, "suspend", "report", "--until", until.isoformat(),
                       "--reason", "vendor API down", "--dsn", dsn)
    assert code == 0 and "until" in out and "(vendor API down)" in out
    code, out, _ = cli(capsys, "schedules", "--dsn", dsn, "--json")
    row, = json.loads(out)
    assert (row["suspended"], row["suspend_reason"]) == (True, "vendor API down")
    assert row["suspend_until"] == until.isoformat()
    assert row["next_utc"] > until.isoformat()  # the next fire is the first after the end
    code, out, _ = cli(capsys, "status", "report", "--dsn", dsn)
    assert code == 0 and out.startswith(
        f"report suspended until {until.isoformat()} (vendor API down);")
    code, out, _ = cli(capsys, "resume", "report", "--dsn", dsn, "--json")
    assert json.loads(out) == {"job": "report", "enabled": True, "suspend_until": None,
                               "suspend_reason": None}
    code, out, _ = cli(capsys, "suspend", "report", "--dsn", dsn)
    assert code == 0 and out == "suspended report until resumed\n"
    assert sql(dsn, "SELECT enabled FROM job_schedule") == [(False,)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("suspend", "nope"), "no schedule for job 'nope'"),
        (("resume", "nope"), "no schedule for job 'nope'"),
        (("suspend", "owned"), "belongs to ClaimSchedule shop/owned: set spec.suspend"),
        (("suspend", "report", "--until", "2001-01-01T00:00:00Z"), "has passed already"),
        (("suspend", "report", "--until", "tomorrow"), "invalid time 'tomorrow'"),
        (("suspend", "report", "--reason", "x" * 1025), "longer than 1024 characters"),
    ],
)
def test_suspend_mistakes_are_one_line(
    dsn: str, store: Store, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
    message: str,
) -> None:
    store.schedules.upsert(job_spec(job_name="report", schedule="0 * * * *", source="cli"))
    store.schedules.upsert(job_spec(job_name="owned", schedule="0 * * * *", source="operator",
                                   owner="shop/owned"))
    code, _, err = cli(capsys, *args, "--dsn", dsn)
    assert code == 1 and message in err and err.count("\n") == 1
    assert sql(dsn, "SELECT count(*) FROM job_schedule WHERE NOT enabled") == [(0,)]


def _claimschedule(**spec: Any) -> dict[str, Any]:
    return {"kind": "ClaimSchedule", "metadata": {"name": "r", "namespace": "shop"},
            "spec": {"schedule": "@daily", **spec}}


def test_a_claimschedule_suspension_with_an_end_keeps_the_row_enabled() -> None:
    spec = from_claimschedule(_claimschedule(suspend=True, suspendUntil="2030-01-01T06:00:00Z",
                                             suspendReason="freeze"))
    assert spec.enabled and spec.suspend_reason == "freeze"
    assert spec.suspend_until is not None and spec.suspend_until.isoformat() == \
        "2030-01-01T06:00:00+00:00"
    plain = from_claimschedule(_claimschedule(suspend=True, suspendReason="freeze"))
    assert (plain.enabled, plain.suspend_until, plain.suspend_reason) == (False, None, "freeze")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"suspendUntil": "2030-01-01T06:00:00Z"}, "suspendUntil: needs suspend: true"),
        ({"suspend": True, "suspendUntil": "soon"}, "not an RFC 3339 instant"),
        ({"suspend": True, "suspendUntil": "2030-01-01T06:00:00"}, "with a zone"),
        ({"suspend": True, "suspendReason": "x" * 1025}, "suspend_reason"),
    ],
)
def test_bad_suspensions_in_a_claimschedule_are_clear(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        from_claimschedule(_claimschedule(**spec))
