"""The core scenarios through pgbouncer in transaction mode (Debian's 1.18: no prepared
statements, LISTEN never hears anything): a claim race, a killed owner's run reclaimed, a paused
owner fenced out, and the catch-up of what fell while no agent ran; notifications either from a
direct listen_dsn or from the poll."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from bench.chaos.harness import SLOW, replicas, store

from tests.helpers.pgbouncer import pgbouncer
from tests.helpers.polling import wait_for

from .support import all_done_between, assert_exactly_once, done_count, first_fire_time, query

pytestmark = pytest.mark.slow

JOBS = [
    {
        "name": "tick",
        "schedule": "@every 1s",
        "after": "effect",
        "sleep": 0.05,
        "catch_up_policy": "All",
        "concurrency_policy": "Allow",
        "lease_seconds": 5,
        "heartbeat_seconds": 1,
    },
    SLOW,
]


def _manual_slow_run(dsn: str, group) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Queue a manual run of `slow`; (its fire time, the agent that runs it)."""
    s = store(dsn)
    (fire_time,) = s.listings.request_runs("slow", [s.db_now()], "manual")
    s.close()
    owner = wait_for(
        lambda: group.query(
            "SELECT claimed_by FROM claimsched.job_runs WHERE job_name = 'slow' "
            "AND fire_time = %s AND status = 'running'",
            [fire_time],
        ),
        "the manual run to start",
        log=group.dump,
    )[0][0]
    return fire_time, owner


def _slow_run(group, fire_time) -> tuple[str, int, str]:  # type: ignore[no-untyped-def]
    ((status, attempt, owner),) = group.query(
        "SELECT status, attempt, claimed_by FROM claimsched.job_runs "
        "WHERE job_name = 'slow' AND fire_time = %s",
        [fire_time],
    )
    return status, attempt, owner


@pytest.mark.parametrize("listen", [False, True], ids=["poll", "listen_dsn"])
def test_the_core_scenarios_hold_through_pgbouncer_in_transaction_mode(
    dsn: str, tmp_path: Path, listen: bool
) -> None:
    began = time.monotonic()
    with pgbouncer(dsn, pool_size=10) as bouncer:
        pooled = bouncer.dsn_for(dsn)
        settings = {"CLAIMSCHED_LISTEN_DSN": dsn} if listen else {"CLAIMSCHED_POLL_SECONDS": "0.5"}
        with replicas(pooled, tmp_path, JOBS, **settings) as group:
            for name in ("r0", "r1", "r2"):
                group.start(name)
            # the claim race: three replicas, every occurrence once
            wait_for(lambda: done_count(dsn) >= 6, "six ticks", timeout=30, log=group.dump)
            mode = "LISTEN on listen_dsn" if listen else "polling every 0.5 s"
            assert all(mode in r.output() for r in group.running.values()), group.dump()

            # kill and reclaim
            fire_time, victim = _manual_slow_run(dsn, group)
            wait_for(
                lambda: group.query("SELECT 1 FROM public.ledger WHERE entity = 'first-half'"),
                "the first effect",
            )
            group.running[victim].signal(signal.SIGKILL)
            wait_for(lambda: _slow_run(group, fire_time)[0] == "done", "the reclaim", timeout=30)
            _, attempt, owner = _slow_run(group, fire_time)
            assert attempt == 2 and owner != victim

            # pause and fence
            fire_time, paused = _manual_slow_run(dsn, group)
            group.running[paused].signal(signal.SIGSTOP)
            wait_for(lambda: _slow_run(group, fire_time)[0] == "done", "the takeover", timeout=30)
            group.running[paused].signal(signal.SIGCONT)
            wait_for(
                lambda: "completion refused" in group.running[paused].output(),
                "the paused owner's completion to be refused",
                timeout=20,
                log=group.dump,
            )
            assert _slow_run(group, fire_time)[2] != paused
            effects = group.query(
                "SELECT entity, count(*) FROM public.ledger WHERE job = 'slow' GROUP BY entity"
            )
            assert sorted(effects) == [("first-half", 2), ("second-half", 2)]

            # catch-up: no agent runs for a while; the next one runs what it missed
            for replica in group.running.values():
                if replica.alive:
                    replica.signal(signal.SIGKILL)
            (gone,) = query(dsn, "SELECT date_trunc('second', now())") or [(None,)]
            wait_for(
                lambda: (
                    query(dsn, "SELECT now() > %s + interval '3 seconds'", [gone[0]]) == [(True,)]
                ),
                "three missed occurrences",
            )
            group.start("late")
            start, end = first_fire_time(dsn), gone[0]
            wait_for(lambda: all_done_between(dsn, start, end), "the catch-up", log=group.dump)
            group.stop_all()
            assert_exactly_once(group, start, end)
    took = time.monotonic() - began
    print(f"\npgbouncer ({'listen_dsn' if listen else 'poll'}): {took:.1f}s")
