"""One owner per job, decided by the database in one statement: a code declaration yields to
the CLI and to a ClaimSchedule, the CLI never rewrites a ClaimSchedule's row, and a released
row goes to the next declaration (a code declaration gets its own spec back, enabled)."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimsched.cli import main
from claimsched.db import OwnedSchedules, Store
from claimsched.records import Written
from claimsched.schedule.specs import job_spec

from .support import sql


def owner(dsn: str) -> list[tuple[object, ...]]:
    return sql(dsn, "SELECT schedule, enabled, source, owner FROM job_schedule")


def test_each_writer_is_refused_by_the_owner_it_may_not_override(dsn: str, store: Store) -> None:
    code = job_spec(job_name="j", schedule="@every 1h")
    cli = job_spec(job_name="j", schedule="@every 2h", source="cli")
    crd = job_spec(job_name="j", schedule="@every 3h", source="operator", owner="a/j")
    other = job_spec(job_name="j", schedule="@every 4h", source="operator", owner="b/j")
    owned = OwnedSchedules(store)

    assert store.schedules.upsert(code) == Written("created")
    assert owned.sync(crd) == Written("unchanged", held_by="a code declaration")
    assert store.schedules.upsert(cli) == Written("updated")  # the CLI overrides code
    held = Written("unchanged", held_by="the CLI (claimsched apply)")
    assert store.schedules.upsert(code) == held
    assert owned.sync(crd) == Written("unchanged", held_by="the CLI (claimsched apply)")
    assert owner(dsn) == [("@every 2h", True, "cli", None)]

    sql(dsn, "DELETE FROM job_schedule")
    assert owned.sync(crd) == Written("created")
    for refused in (code, cli, other):
        writer = owned.sync if refused.source == "operator" else store.schedules.upsert
        assert writer(refused) == Written("unchanged", held_by="ClaimSchedule a/j")
    assert owner(dsn) == [("@every 3h", True, "operator", "a/j")]

    assert owned.release("b/j") is None  # not b's: nothing released
    assert owned.release("a/j") == "j"
    assert owner(dsn) == [("@every 3h", False, "operator", None)]
    assert store.schedules.upsert(code) == Written("updated")  # enabled again, its own spec
    assert owner(dsn) == [("@every 1h", True, "code", None)]


def test_apply_says_who_owns_a_job_it_may_not_write(
        tmp_path: Path, dsn: str, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    OwnedSchedules(store).sync(job_spec(job_name="report", schedule="@daily", source="operator",
                                        owner="shop/report"))
    path = tmp_path / "s.yaml"
    path.write_text("kind: ClaimSchedule\nmetadata: {name: report}\nspec: {schedule: '@hourly'}\n")
    assert main(["apply", str(path), "--dsn", dsn]) == 1
    out = capsys.readouterr().out
    assert out == "claimschedule/report refused (the job belongs to ClaimSchedule shop/report)\n"
    assert owner(dsn) == [("@daily", True, "operator", "shop/report")]
