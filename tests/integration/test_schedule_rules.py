"""job_schedule's CHECKs and defaults are `claimsched.schedule.specs`' rules: each is tried at
its edges in a real database, and the database refuses exactly what a JobSpec refuses (the CRD
and the operator's models: tests/operator/test_claimschedule_rules.py)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import sql

from claimsched.errors import ClaimschedError
from claimsched.schedule import specs
from claimsched.schedule.specs import JobSpec


def database_accepts(dsn: str, **fields: Any) -> bool:
    row = {"job_name": "job", "schedule": "@daily", **fields}
    statement = sql.SQL("INSERT INTO job_schedule ({}) VALUES ({})").format(
        sql.SQL(", ").join(map(sql.Identifier, row)),
        sql.SQL(", ").join(sql.Placeholder() * len(row)))
    with psycopg.connect(dsn) as conn:
        conn.execute("SET search_path = claimsched, public")
        try:
            conn.execute(statement, list(row.values()))
        except pgerrors.CheckViolation:
            return False
        finally:
            conn.rollback()
    return True


def agent_accepts(**fields: Any) -> bool:
    try:
        JobSpec(job_name="job", schedule="@daily", **fields)
    except ClaimschedError:
        return False
    return True


def edges(least: int, most: int | None) -> list[int]:
    return [least - 1, least, least + 1] + ([] if most is None else [most - 1, most, most + 1])


@pytest.mark.parametrize("name", specs.BOUNDS)
def test_each_bound_is_the_database_s(dsn: str, name: str) -> None:
    least, most = specs.BOUNDS[name]
    for value in edges(least, most):
        fields = {name: value}
        if name == "lease_seconds":
            fields["heartbeat_seconds"] = 1
        if name == "heartbeat_seconds":
            fields["lease_seconds"] = min(3 * value, 86400)
        assert database_accepts(dsn, **fields) == agent_accepts(**fields), fields


@pytest.mark.parametrize("name", specs.CHOICES)
def test_each_choice_is_the_database_s(dsn: str, name: str) -> None:
    for value in (*specs.CHOICES[name], "Other", "forbid"):
        assert database_accepts(dsn, **{name: value}) == (value in specs.CHOICES[name]), value


def test_heartbeat_against_lease_is_the_database_s(dsn: str) -> None:
    for lease in (1, 2, 3, 4, 5, 6, 59, 60, 61):
        for heartbeat in (1, 2, 3, 19, 20, 21):
            fields = {"lease_seconds": lease, "heartbeat_seconds": heartbeat}
            assert database_accepts(dsn, **fields) == specs.heartbeat_fits(heartbeat, lease) \
                == agent_accepts(**fields), fields


def test_the_job_name_and_suspend_reason_are_the_database_s(dsn: str) -> None:
    for name in ("a", "x" * 128, "x" * 129, "-a", "a b", "Nightly.v2"):
        assert database_accepts(dsn, job_name=name) == bool(specs.JOB_NAME.fullmatch(name))
    for length in (specs.MAX_REASON, specs.MAX_REASON + 1):
        assert database_accepts(dsn, enabled=False, suspend_reason="x" * length) \
            == agent_accepts(enabled=False, suspend_reason="x" * length)


def test_each_column_default_is_the_spec_s(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SET search_path = claimsched, public")
        conn.execute("INSERT INTO job_schedule (job_name, schedule) VALUES ('job', '@daily')")
        columns = [c for c in specs.SPEC_COLUMNS if c != "schedule"]
        stored = conn.execute(
            sql.SQL("SELECT {} FROM job_schedule").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)))).fetchone()
        conn.rollback()
    assert stored is not None
    defaults = JobSpec(job_name="job", schedule="@daily").row()
    assert dict(zip(columns, stored, strict=True)) == {c: defaults[c] for c in columns}
