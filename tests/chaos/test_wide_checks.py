"""The wide soak's SQL checks (bench/chaos/wide.py) on a real Postgres: a clean ledger passes,
and each check catches what it must."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from bench.chaos import app_sql
from bench.chaos.wide import WIDE_CHECKS, wide_check

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
JOBS = ("w0000", "w0001")
SECONDS = 5  # occurrences T0 .. T0+4 s of each job
CUTOFF = T0 + timedelta(seconds=SECONDS - 1)
RETRIED = ("w0001", T0 + timedelta(seconds=2))  # attempt 1 by a fenced out, attempt 2 by b


@pytest.fixture
def ledger(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A clean wide ledger: every occurrence done once, one of them by its second attempt."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(app_sql.LEDGER)
        for job in JOBS:
            conn.execute(
                "INSERT INTO claimsched.job_schedule (job_name, schedule, active_since) "
                "VALUES (%s, '@every 1s', %s)",
                [job, T0 - timedelta(seconds=0.5)],
            )
            for second in range(SECONDS):
                fire = T0 + timedelta(seconds=second)
                retried = (job, fire) == RETRIED
                agent, attempt = ("b", 2) if retried else ("a", 1)
                ((rid,),) = conn.execute(
                    "INSERT INTO claimsched.job_runs (job_name, fire_time, status, attempt, "
                    "claimed_by, started_at, finished_at) VALUES (%s, %s, 'done', %s, %s, %s, %s) "
                    "RETURNING id",
                    [job, fire, attempt, agent, fire, fire + timedelta(seconds=0.1)],
                ).fetchall()
                if retried:
                    conn.execute(
                        "INSERT INTO claimsched.job_attempts (job_name, fire_time, attempt, "
                        "run_id, claimed_by, outcome) VALUES (%s, %s, 1, %s, 'a', 'fenced_out')",
                        [job, fire, rid],
                    )
                conn.execute(
                    "INSERT INTO claimsched.job_effects (entity, job_name, fire_time, run_id, "
                    "attempt) VALUES ('tick', %s, %s, %s, %s)",
                    [job, fire, rid, attempt],
                )
                conn.execute(
                    "INSERT INTO public.wide_ledger (job, fire_time, agent, attempt, at) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [job, fire, agent, attempt, fire + timedelta(seconds=0.05)],
                )
        yield conn


def test_a_clean_ledger_passes(ledger: psycopg.Connection[Any]) -> None:
    counts, found = wide_check(ledger, CUTOFF)
    assert found == []
    assert set(counts) == set(WIDE_CHECKS) and not any(counts.values())


FIRE = T0 + timedelta(seconds=1)
# each breakage: statements on w0000's occurrence at %(fire)s or on the retried one (w0001)
BREAKAGES = {
    # the effect happened twice (a second attempt wrote it again)
    "duplicate effect": (
        "INSERT INTO public.wide_ledger (job, fire_time, agent, attempt) "
        "VALUES ('w0000', %(fire)s, 'a', 1)",
    ),
    # an occurrence due before the cutoff never ran
    "missed occurrence": (
        "DELETE FROM public.wide_ledger WHERE job = 'w0000' AND fire_time = %(fire)s",
        "DELETE FROM claimsched.job_effects WHERE job_name = 'w0000' AND fire_time = %(fire)s",
        "DELETE FROM claimsched.job_runs WHERE job_name = 'w0000' AND fire_time = %(fire)s",
    ),
    # the fenced-out attempt 1 was never finished: the run ended failed at attempt 2
    "fenced-out attempt never finished by a later attempt": (
        "UPDATE claimsched.job_runs SET status = 'failed', error = 'boom' "
        "WHERE job_name = 'w0001' AND fire_time = %(retried)s",
    ),
    "run not finished as done": (
        "UPDATE claimsched.job_runs SET status = 'running' "
        "WHERE job_name = 'w0000' AND fire_time = %(fire)s",
    ),
    "done without its effect": (
        "DELETE FROM public.wide_ledger WHERE job = 'w0000' AND fire_time = %(fire)s",
        "DELETE FROM claimsched.job_effects WHERE job_name = 'w0000' AND fire_time = %(fire)s",
    ),
    "effect without receipt": (
        "DELETE FROM claimsched.job_effects WHERE job_name = 'w0000' AND fire_time = %(fire)s",
    ),
    "receipt without the app's write": (
        "DELETE FROM public.wide_ledger WHERE job = 'w0000' AND fire_time = %(fire)s",
    ),
    # the effect written by attempt 1 as agent c, which never held the run (a held it)
    "effect without a lease": (
        "UPDATE public.wide_ledger SET agent = 'c', attempt = 1 "
        "WHERE job = 'w0001' AND fire_time = %(retried)s",
        "UPDATE claimsched.job_effects SET attempt = 1 "
        "WHERE job_name = 'w0001' AND fire_time = %(retried)s",
    ),
    "superseded attempt not kept": (
        "DELETE FROM claimsched.job_attempts WHERE job_name = 'w0001' AND fire_time = %(retried)s",
    ),
}


@pytest.mark.parametrize("check", sorted(BREAKAGES))
def test_each_check_catches_its_breakage(ledger: psycopg.Connection[Any], check: str) -> None:
    for statement in BREAKAGES[check]:
        ledger.execute(statement, {"fire": FIRE, "retried": RETRIED[1]})
    counts, found = wide_check(ledger, CUTOFF)
    assert counts[check] >= 1, found
    assert any(line.startswith(f"{check}: ") for line in found)


def test_an_occurrence_after_the_cutoff_is_not_checked(ledger: psycopg.Connection[Any]) -> None:
    counts, _ = wide_check(ledger, CUTOFF - timedelta(seconds=1))
    assert not any(counts.values())
    ledger.execute("DELETE FROM public.wide_ledger WHERE fire_time = %s", [CUTOFF])
    ledger.execute("DELETE FROM claimsched.job_effects WHERE fire_time = %s", [CUTOFF])
    ledger.execute("DELETE FROM claimsched.job_runs WHERE fire_time = %s", [CUTOFF])
    counts, _ = wide_check(ledger, CUTOFF - timedelta(seconds=1))
    assert not any(counts.values())
    counts, _ = wide_check(ledger, CUTOFF)
    assert counts["missed occurrence"] == len(JOBS)
