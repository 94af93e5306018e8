"""Real agent processes, real signals: every fault of the agent issue, shown once."""

from __future__ import annotations

import itertools
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from bench.chaos.harness import SLOW, Replicas, replicas, store

from claimsched.tools.postgres import TemporaryPostgres
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow


def _done(group, job: str) -> int:  # type: ignore[no-untyped-def]
    return group.query(
        "SELECT count(*) FROM claimsched.job_runs WHERE job_name = %s AND status = 'done'", [job]
    )[0][0]


def _assert_exactly_once(group, job: str) -> list:  # type: ignore[no-untyped-def]
    rows = group.query(
        "SELECT fire_time, status FROM claimsched.job_runs WHERE job_name = %s ORDER BY fire_time",
        [job],
    )
    effects = Counter(group.query("SELECT fire_time FROM public.ledger WHERE job = %s", [job]))
    starts = Counter(group.query("SELECT fire_time FROM public.starts WHERE job = %s", [job]))
    done = [t for t, status in rows if status == "done"]
    assert all(n == 1 for n in effects.values()), f"duplicate effects: {effects.most_common(3)}"
    assert all(n == 1 for n in starts.values()), f"handler ran twice: {starts.most_common(3)}"
    assert {(t,) for t in done} == set(effects), "every done occurrence has exactly one effect"
    fire_times = [t for t, _ in rows]
    gaps = [b - a for a, b in itertools.pairwise(fire_times)]
    assert all(gap == timedelta(seconds=1) for gap in gaps), f"missed occurrences: {gaps}"
    return rows


def _one_running_run(group: Replicas, dsn: str, job: str, agents: int) -> str:
    """Wait for the agents, queue one manual run of `job`, return the agent that runs it."""
    wait_for(lambda: len(group.query("SELECT 1 FROM claimsched.agents")) == agents, what="agents")
    s = store(dsn)
    s.listings.request_runs(job, [s.db_now()], "manual")
    s.close()
    return str(wait_for(lambda: group.owner_of_running(job), what="a running run"))


def test_three_replicas_run_every_occurrence_exactly_once(dsn: str, tmp_path: Path) -> None:
    jobs = [
        {
            "name": "tick",
            "schedule": "@every 1s",
            "after": "report",
            "sleep": 0.05,
            "catch_up_policy": "All",
            "lease_seconds": 5,
            "heartbeat_seconds": 1,
        }
    ]
    with replicas(dsn, tmp_path, jobs) as group:
        for index in range(3):
            group.start(f"r{index}")
        wait_for(lambda: _done(group, "tick") >= 16, timeout=60, what="16 done occurrences")
        rows = _assert_exactly_once(group, "tick")
        winners = Counter(
            r[0]
            for r in group.query(
                "SELECT claimed_by FROM claimsched.job_runs WHERE job_name = 'tick'"
            )
        )
        assert len(rows) >= 16 and len(winners) >= 2, winners
        assert all(r.alive for r in group.running.values())


def test_a_killed_replicas_run_is_reclaimed_and_finished_without_repeating_effects(
    dsn: str, tmp_path: Path
) -> None:
    with replicas(dsn, tmp_path, [SLOW]) as group:
        for index in range(3):
            group.start(f"r{index}")
        victim = _one_running_run(group, dsn, "slow", 3)
        wait_for(
            lambda: group.query("SELECT 1 FROM public.ledger WHERE entity = 'first-half'"),
            what="the first effect",
        )
        group.running[victim].signal(signal.SIGKILL)
        wait_for(lambda: _done(group, "slow") == 1, timeout=30, what="the reclaimed run to finish")
        ((status, attempt, owner, orphans),) = group.query(
            "SELECT status, attempt, claimed_by, orphan_count FROM claimsched.job_runs"
        )
        assert (status, attempt, orphans) == ("done", 2, 1) and owner != victim
        effects = Counter(e for (e,) in group.query("SELECT entity FROM public.ledger"))
        assert effects == {"first-half": 1, "second-half": 1}


@pytest.mark.parametrize("kind", ["manual", "scheduled"])
def test_a_killed_replicas_run_starts_again_a_lease_later_whatever_the_housekeeping_period(
    dsn: str, tmp_path: Path, kind: str
) -> None:
    """Housekeeping every 30 s, a 5-s lease renewed every second: the run of a replica killed
    mid-run is reaped when its lease ends (not at the survivor's next housekeeping) and its
    attempt 2 starts on the survivor about a lease after the kill."""
    long = {"name": "long", "schedule": "@yearly" if kind == "manual" else "@every 15s",
            "after": "x", "sleep": 60, "lease_seconds": 5, "heartbeat_seconds": 1}
    with replicas(dsn, tmp_path, [long], CLAIMSCHED_HOUSEKEEPING_SECONDS="30") as group:
        group.start("r0")
        group.start("r1")
        if kind == "manual":
            victim = _one_running_run(group, dsn, "long", 2)
        else:
            victim = str(wait_for(lambda: group.owner_of_running("long"), timeout=40,
                                  what="a scheduled run", log=group.dump))
        group.running[victim].signal(signal.SIGKILL)
        ((killed_at,),) = group.query("SELECT now()")
        ((started_at, owner),) = wait_for(
            lambda: group.query("SELECT started_at, claimed_by FROM claimsched.job_runs"
                                " WHERE job_name = 'long' AND attempt = 2"),
            timeout=25, what="attempt 2", log=group.dump)
        assert owner != victim
        # lease (5 s) + heartbeat (1 s) + slack for a busy machine; the period is 30 s
        assert started_at - killed_at < timedelta(seconds=12), started_at - killed_at


def test_a_paused_replica_is_fenced_out_when_it_wakes_up(dsn: str, tmp_path: Path) -> None:
    jobs = [
        {
            "name": "slow",
            "schedule": "@yearly",
            "after": "report",
            "sleep": 1.5,
            "lease_seconds": 3,
            "heartbeat_seconds": 1,
        }
    ]
    with replicas(dsn, tmp_path, jobs) as group:
        for index in range(3):
            group.start(f"r{index}")
        paused = _one_running_run(group, dsn, "slow", 3)
        group.running[paused].signal(signal.SIGSTOP)
        wait_for(lambda: _done(group, "slow") == 1, timeout=30, what="the reclaimed run")
        group.running[paused].signal(signal.SIGCONT)
        wait_for(
            lambda: "completion refused" in group.running[paused].output(),
            timeout=20,
            what="the paused replica's completion to be refused",
        )
        log = group.running[paused].output()
        assert "LeaseLost" in log
        ((status, attempt, owner),) = group.query(
            "SELECT status, attempt, claimed_by FROM claimsched.job_runs"
        )
        assert (status, attempt) == ("done", 2) and owner != paused
        assert group.query("SELECT agent, attempt FROM public.ledger") == [(owner, 2)]


def test_a_run_fenced_out_by_a_pause_is_given_back_and_finished_by_its_next_attempt(
    dsn: str, tmp_path: Path
) -> None:
    """Alone, nobody takes the run over while its owner is stopped: when it wakes up, its late
    effect is refused and its handler ends with LeaseLost. That is not the job's failure: the
    run goes back, and the next attempt does the rest of the work."""
    jobs = [{**SLOW, "name": "slow", "sleep": 1.0}]
    with replicas(dsn, tmp_path, jobs) as group:
        group.start("only")
        paused = _one_running_run(group, dsn, "slow", 1)
        wait_for(
            lambda: group.query("SELECT 1 FROM public.ledger WHERE entity = 'first-half'"),
            what="the first effect",
        )
        group.running[paused].signal(signal.SIGSTOP)
        wait_for(
            lambda: group.query("SELECT lease_until < now() - interval '1 second'"
                                " FROM claimsched.job_runs")[0][0],
            timeout=20,
            what="the lease to run out while its owner is stopped",
        )
        group.running[paused].signal(signal.SIGCONT)
        wait_for(lambda: _done(group, "slow") == 1, timeout=30, what="the run to be finished")
        ((status, attempt, error),) = group.query(
            "SELECT status, attempt, error FROM claimsched.job_runs"
        )
        assert (status, attempt) == ("done", 2), error
        # Which comes first after the SIGCONT decides how attempt 1 is remembered: its handler
        # giving the run back (fenced_out), or the reaper and a reclaim (orphaned: the late
        # give-back is then refused). Either way the next attempt finished the work.
        history = group.query("SELECT attempt, outcome FROM claimsched.job_attempts")
        assert len(history) == 1 and history[0][0] == 1, history
        assert history[0][1] in ("fenced_out", "orphaned"), history
        assert "LeaseLost" in group.running[paused].output()
        assert "run failed" not in group.running[paused].output()
        effects = Counter(e for (e,) in group.query("SELECT entity FROM public.ledger"))
        assert effects == {"first-half": 1, "second-half": 1}


def test_replicas_with_skewed_clocks_never_cause_a_second_run(dsn: str, tmp_path: Path) -> None:
    """One replica's clock 90 s ahead, another's 90 s behind, beside one that is right: the
    database's clock decides, so nothing runs early or twice, and both skewed ones take part."""
    jobs = [
        {
            "name": "tick",
            "schedule": "@every 1s",
            "after": "report",
            "sleep": 0.05,
            "catch_up_policy": "All",
            "concurrency_policy": "Allow",
        }
    ]
    with replicas(dsn, tmp_path, jobs) as group:
        group.start("ahead", skew="+90s")
        group.start("behind", skew="-90s")
        group.start("r1")
        wait_for(lambda: _done(group, "tick") >= 20, timeout=60, what="20 done occurrences")
        _assert_exactly_once(group, "tick")
        early = group.query("SELECT count(*) FROM claimsched.job_runs WHERE started_at < fire_time")
        assert early == [(0,)]
        claimed = dict(group.query(
            "SELECT claimed_by, count(*) FROM claimsched.job_runs GROUP BY claimed_by"))
        assert claimed.get("ahead", 0) > 0 and claimed.get("behind", 0) > 0, claimed


def test_agents_survive_a_database_outage_and_catch_up(tmp_path: Path) -> None:
    jobs = [
        {
            "name": "all",
            "schedule": "@every 1s",
            "after": "x",
            "catch_up_policy": "All",
            "concurrency_policy": "Allow",
        },
        {"name": "latest", "schedule": "@every 1s", "after": "x", "catch_up_policy": "Latest"},
    ]
    with TemporaryPostgres() as pg:
        s = store(pg.dsn)
        s.admin.migrate()
        s.close()
        with replicas(pg.dsn, tmp_path, jobs) as group:
            group.start("r0")
            group.start("r1")
            wait_for(lambda: _done(group, "all") >= 3, what="runs before the outage")
            pg.stop("fast")
            import time

            outage_started = time.monotonic()
            while time.monotonic() - outage_started < 3.5:  # longer than two periods, by design
                assert all(r.alive for r in group.running.values())
                time.sleep(0.1)
            pg.start()
            before = _done(group, "all")
            wait_for(lambda: _done(group, "all") >= before + 5, timeout=30, what="catch-up")
            assert all(r.alive for r in group.running.values()), group.dump()
            _assert_exactly_once(group, "all")
            latest = group.query(
                "SELECT status, error FROM claimsched.job_runs WHERE job_name = 'latest' "
                "AND status = 'skipped'"
            )
            assert any("Latest" in error for _, error in latest), latest
            # The catch-up run may still be running at the next fire time (it started late):
            # Forbid skips that one, rightly. Any other skip is a missed one, Latest's.
            overlapped = group.query(
                "SELECT count(*) FROM claimsched.job_runs r WHERE r.job_name = 'latest'"
                " AND r.error LIKE '%concurrencyPolicy Forbid%' AND EXISTS ("
                "  SELECT 1 FROM claimsched.job_runs p WHERE p.job_name = 'latest'"
                "  AND p.fire_time < r.fire_time AND p.started_at <= r.started_at"
                "  AND p.finished_at > r.started_at)"
            )[0][0]
            assert sum("Latest" not in error for _, error in latest) == overlapped, latest
            assert any("database unavailable" in r.output() for r in group.running.values())


def test_sigterm_lets_a_short_run_finish(dsn: str, tmp_path: Path) -> None:
    jobs = [{"name": "short", "schedule": "@yearly", "after": "x", "sleep": 1}]
    with replicas(dsn, tmp_path, jobs) as group:
        replica = group.start("r0")
        _one_running_run(group, dsn, "short", 1)
        replica.signal(signal.SIGTERM)
        assert replica.process.wait(15) == 0
        assert group.query("SELECT status, claimed_by, attempt FROM claimsched.job_runs") == [
            ("done", "r0", 1)
        ]


def test_sigterm_hands_a_long_run_to_another_replica_at_once(dsn: str, tmp_path: Path) -> None:
    jobs = [
        {
            "name": "long",
            "schedule": "@yearly",
            "after": "x",
            "sleep": 3,
            "lease_seconds": 60,
            "heartbeat_seconds": 10,
        }
    ]
    # the hand-back is reaped by the stopping replica itself: not at the next housekeeping
    settings = {"CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": "0.5", "CLAIMSCHED_HOUSEKEEPING_SECONDS": "30"}
    with replicas(dsn, tmp_path, jobs, **settings) as group:
        group.start("r0")
        group.start("r1")
        owner = _one_running_run(group, dsn, "long", 2)
        group.running[owner].signal(signal.SIGTERM)
        other = "r1" if owner == "r0" else "r0"
        wait_for(
            lambda: group.owner_of_running("long") == other,
            timeout=5,
            what="the other replica to take the run over (long before the 60 s lease)",
        )
        assert group.running[owner].process.wait(15) == 0
        wait_for(lambda: _done(group, "long") == 1, timeout=20, what="the handed-off run")
        assert group.query("SELECT agent, attempt FROM public.ledger") == [(other, 2)]


def test_sigterm_while_the_database_is_away_exits_within_the_grace(tmp_path: Path) -> None:
    """The grace bounds a shutdown even with Postgres down: no wait for a connection outlives
    it by more than STOP_MARGIN, and the unfinished run is left to its lease."""
    import time

    from claimsched.agent import STOP_MARGIN

    grace = 1.0
    jobs = [
        {"name": "tick", "schedule": "@every 1s", "after": "x", "sleep": 30,
         "concurrency_policy": "Allow", "lease_seconds": 60, "heartbeat_seconds": 10},
    ]
    with TemporaryPostgres() as pg:
        s = store(pg.dsn)
        s.admin.migrate()
        s.close()
        with replicas(
            pg.dsn, tmp_path, jobs, CLAIMSCHED_SHUTDOWN_GRACE_SECONDS=str(grace)
        ) as group:
            replica = group.start("r0")
            wait_for(lambda: group.owner_of_running("tick") == "r0", what="a running run")
            pg.stop("fast")
            signalled = time.monotonic()
            replica.signal(signal.SIGTERM)
            code = replica.process.wait(60)
            took = time.monotonic() - signalled
            assert code == 0, group.dump()
            assert took <= grace + STOP_MARGIN + 3, f"shutdown took {took:.1f} s\n{group.dump()}"
            assert "could not hand runs back" in replica.output()
            pg.start()
            assert group.query(
                "SELECT count(*) FROM claimsched.job_runs WHERE status = 'running'"
            ) != [(0,)], "the unfinished run stays running until its lease expires"
