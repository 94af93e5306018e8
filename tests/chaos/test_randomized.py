"""Random, overlapping faults from seeded schedules: the guarantees hold on every seed.

The CI profile: R=5 replicas, J=20 jobs, 22 s of faults per seed, four fixed seeds (about
40 s each), each planning every fault kind but the long outage (the recovery faults too: the
owner of a reclaimed run paused past its lease, a backfill's worker killed, the whole fleet
down); and on a synchronous Patroni cluster one seed, R=3 J=8 for 40 s, whose faults include a
SIGKILL of the leader (a failover) and a partition (about 100 s).
CHAOS_SEEDS=1,2,3 replays other seeds; a failure prints its seed, the faults, each violated
invariant and the command that replays it.
The soak profile is bench/soak.py.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from bench.chaos.checker import Checker
from bench.chaos.cli import main
from bench.chaos.config import ChaosConfig
from bench.chaos.faults import FLEET
from bench.chaos.kinds import FAILOVER, FAULT_KINDS, HA_KINDS, PARTITION, PG_FAULTS, POOLER
from bench.chaos.maintenance import lapse_partition
from bench.chaos.plan import WATCHING, outage, plan
from bench.chaos.recovery import FLEET_DOWN, KILL_BACKFILLER, PAUSE_RECLAIMER, work_seconds
from bench.chaos.recovery_checks import FORBID_BUSY, RecoveryChecks, RecoveryLog
from bench.chaos.report import summary
from bench.chaos.storm import ChaosRun, run_seed

from claimsched.db import Store
from claimsched.plan.planner import MISSED_LATEST, MISSED_NONE
from claimsched.records import Completion
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for
from tests.integration.support import due, runs

CI_SEEDS = [int(s) for s in os.environ.get("CHAOS_SEEDS", "11,31,37,59").split(",")]
# Every kind but the outage longer than the lease: with three Postgres faults in 22 s one of them
# finds no room, and the long outage's catch-up costs the profile its budget (soak and replay
# draw it; an ordinary outage already outlasts the shorter leases).
CI_KINDS = tuple(k for k in FAULT_KINDS if k != "long_outage")


# Its plan SIGKILLs the leader mid-storm and partitions a replica (see the plan test below).
HA_SEED = 16


def ci_config(seed: int) -> ChaosConfig:
    return ChaosConfig(seed=seed, replicas=5, jobs=20, duration=22.0, kinds=CI_KINDS)


def ha_config(seed: int) -> ChaosConfig:
    return ChaosConfig(seed=seed, replicas=3, jobs=8, duration=40.0, kinds=HA_KINDS, ha=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_random_overlapping_faults_never_break_a_guarantee(seed: int, tmp_path: Path) -> None:
    report = run_seed(ci_config(seed), tmp_path)
    print(summary(report))
    assert not report["violations"], summary(report)
    # the storm really happened: every kind of fault, some at once, over real work
    _every_kind_happened(report)
    assert report["max_concurrent_faults"] >= 2, summary(report)
    assert report["occurrences_checked"] >= 150, summary(report)
    assert report["maintenance"].get("runs", 0) >= 2, summary(report)
    _odd_replicas_were_pooled(tmp_path)


def _every_kind_happened(report: dict[str, Any]) -> None:
    """Every kind of fault planned happened, but for at most one of those that wait for their
    moment (WATCHING: a reclaimed run, a worked backfill, on a replica no other fault holds or
    is planned to hold), which then says what it found instead. Under a loaded machine's timing
    one of them finds none now and then; both missing, or any other kind, fails."""
    missing = {kind for kind, n in report["fault_counts"].items() if n < 1}
    excused = missing & set(WATCHING) & set(report["faults_missed"])
    assert missing == excused and len(excused) <= 1, summary(report)


def _odd_replicas_were_pooled(folder: Path) -> None:
    """The odd slots' replicas reached the database through the pooler (poll mode), the even
    ones directly."""
    first = {log.name[:2]: log for log in folder.glob("r[0-9].1.log")}  # each slot's first
    assert {"r0", "r1"} <= first.keys(), sorted(first)
    for slot, log in first.items():
        pooled = int(slot[1]) % 2 == 1
        assert ("connection pooler" in log.read_text(errors="replace")) == pooled, log.name


@pytest.mark.slow
def test_a_failover_and_a_partition_on_a_synchronous_cluster_never_break_a_guarantee(
    tmp_path: Path,
) -> None:
    report = run_seed(ha_config(HA_SEED), tmp_path)
    print(summary(report))
    assert not report["violations"], summary(report)
    _every_kind_happened(report)
    (failover,) = [e for e in report["faults_executed"] if e["kind"] == FAILOVER]
    assert failover["detail"].startswith("SIGKILL"), failover
    # the agents followed the promotion through the DSN naming both nodes, and noticed it
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    assert "action=failover" in logs
    _odd_replicas_were_pooled(tmp_path)  # through a pgbouncer moved to each new leader
    assert report["occurrences_checked"] >= 150, summary(report)


# -- the plan is a pure function of the seed -------------------------------------------------------


def _plan(seed: int) -> tuple[list[dict[str, Any]], list[Any]]:
    jobs, _, _, faults, _ = plan(ci_config(seed))
    return jobs, faults


@pytest.mark.parametrize("seed", [*CI_SEEDS, 1, 2, 3, 4, 5, 6, 7, 8])
def test_a_seed_always_gives_the_same_storm_and_the_storm_is_sane(seed: int) -> None:
    jobs, faults = _plan(seed)
    assert (jobs, faults) == _plan(seed)
    assert {f.kind for f in faults} <= set(FAULT_KINDS)
    assert len({j["name"] for j in jobs}) == 20
    assert {j["concurrency_policy"] for j in jobs} == {"Forbid", "Allow"}
    pg = sorted((f.at, f.at + f.duration) for f in faults if f.kind in PG_FAULTS)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(pg)), "one Postgres fault at once"
    assert all(-300 <= f.value <= 300 for f in faults if f.kind == "skew")
    _lanes_are_sane(faults, [f"r{i}" for i in range(5)])


def _lanes_are_sane(faults: list[Any], slots: list[str]) -> None:
    """Each replica lane holds one fault at a time, and one lane at least is free at every
    instant but while the whole fleet is down."""
    held = [f for f in faults if f.until > f.at and f.target in (*slots, FLEET)]
    for slot in slots:
        mine = sorted((f.at, f.until) for f in held if f.target in (slot, FLEET))
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(mine)), slot
    for instant in sorted({f.at for f in held}):
        now = [f for f in held if f.at <= instant < f.until]
        assert len(now) < len(slots) or [f.target for f in now] == [FLEET], instant


@pytest.mark.parametrize("seed", [*CI_SEEDS, 1, 2, 3])
def test_the_pooler_is_killed_or_paused_one_fault_at_a_time_some_past_every_lease(
    seed: int,
) -> None:
    jobs, _, _, faults, _ = plan(ci_config(seed))
    pooler = sorted((f.at, f.until, f.value, f.duration) for f in faults if f.kind == POOLER)
    assert pooler, seed
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(pooler)), pooler  # one at a time
    assert {value for _, _, value, _ in pooler} <= {0.0, 1.0}
    lease_max = max(j["lease_seconds"] for j in jobs)
    assert all(duration <= 4.0 for _, _, value, duration in pooler if not value)  # killed
    assert all(duration <= lease_max + 3.0 for _, _, value, duration in pooler if value)
    # a fault that waits for its moment reading job_runs never waits through a pooler fault
    # (half the fleet's database fault): CI seeds 11, 37 and 59 once found nothing to kill
    watches = [(f.at, f.at + WATCHING[f.kind]) for f in faults if f.kind in WATCHING]
    for at, _, _, duration in pooler:
        assert not any(a < at + duration + 1.0 and at < b for a, b in watches), (at, watches)


def test_the_pooler_needs_two_replicas() -> None:
    with pytest.raises(ValueError, match="pooler puts the odd replicas behind a pooler"):
        ChaosConfig(seed=1, replicas=1, kinds=(POOLER,))


@pytest.mark.parametrize(("error", "violation"), [
    ("OperationalError: connection failed: Connection refused", False),
    ("LeaseLost: the lease of j @ 08:04:32 attempt 3 is gone", True),
    ("fenced out (claimed by r1, attempt 3): Abandoned: lease lost after 2.0s", True),
])
def test_a_paused_attempt_may_fail_for_its_own_error_but_never_for_its_lost_lease(
        error: str, violation: bool) -> None:
    """Seed 11 once paused a reclaimer whose handler woke to a database that was away: its
    own error, recorded while nobody had taken over, then retried and done. Failed because it
    lost its lease would be lost work."""
    fire = datetime(2026, 12, 5, 8, 4, 32, tzinfo=UTC)
    run = ("id", "j", fire, "done", 4, "r4", None, None, None)
    checks = RecoveryChecks({"j": {}}, {"j": 5}, [run])
    attempts = [("j", fire, 3, None, "r1", "failed")]
    found = checks.run(attempts, [("j", fire, 3, "r1", "failed", error)],
                       RecoveryLog(paused=[("j", fire, 3, "r1")]), [])
    assert bool(found) is violation, found


def test_the_recovery_faults_are_planned_as_their_checks_expect() -> None:
    window = job_spec(job_name="j", schedule="@every 1s", source="cli").catch_up_window_seconds
    for seed in [*CI_SEEDS, 1, 2, 3, 4, 5, 6, 7, 8]:
        jobs, faults = _plan(seed)
        periods = [j["period"] for j in jobs]
        by_name = {j["name"]: j for j in jobs}
        outages = [outage(f.kind, f.at, f.duration) for f in faults if f.kind in PG_FAULTS]
        for fault in faults:
            if fault.kind == PAUSE_RECLAIMER:  # some second attempt is nearly always running
                assert any(j["name"].endswith("retried-allow") for j in jobs)
            if fault.kind == FLEET_DOWN:  # every job misses one occurrence at least
                assert fault.target == FLEET and max(periods) < fault.duration < window / 100
                assert 0 < fault.value < 2**5 - 1, "SIGKILL for some, SIGTERM for others"
            if fault.kind == KILL_BACKFILLER:  # a first attempt long enough to be killed at work
                job = by_name[fault.job]
                assert work_seconds(job) >= 1.0 and not job.get("fail_every")
            if fault.kind in WATCHING:  # job_runs is readable while they wait
                watch = fault.at + WATCHING[fault.kind]
                assert not any(a < watch and fault.at < b for a, b in outages)
        ranges = [(f.job, f.value) for f in faults if f.kind == KILL_BACKFILLER]
        assert len(ranges) == len(set(ranges)), "each backfill queues occurrences of its own"
        assert all(value > 8 + 2 for _, value in ranges), "older than the backfill fault's"


def test_the_ci_seeds_plan_every_kind_of_fault() -> None:
    for seed in CI_SEEDS:
        _, faults = _plan(seed)
        assert {f.kind for f in faults} == set(CI_KINDS), seed


@pytest.mark.parametrize("seed", [HA_SEED, 1, 2, 4, 5])
def test_an_ha_storm_fails_over_the_database_and_partitions_replicas_past_every_lease(
    seed: int,
) -> None:
    jobs, _, _, faults, _ = plan(ha_config(seed))
    kinds = {f.kind for f in faults}
    assert PARTITION in kinds and kinds <= set(HA_KINDS)  # no restart of a standalone server
    lease_max = max(j["lease_seconds"] for j in jobs)
    for fault in faults:
        if fault.kind == FAILOVER:
            assert fault.target == "postgres" and fault.value in (0, 1)
        if fault.kind == PARTITION:
            assert fault.target.startswith("r") and fault.duration > lease_max
    _lanes_are_sane(faults, ["r0", "r1", "r2"])
    if seed == HA_SEED:
        assert kinds == set(HA_KINDS)
        assert [f.value for f in faults if f.kind == FAILOVER] == [1]  # a SIGKILL


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--kinds", "failover"], "failover needs a Patroni cluster: add --ha"),
        (["--ha", "--kinds", "sigkill,pg_outage"], "with --ha the database fault is failover"),
        (["--kinds", "sigkill,unplug"], "unknown fault kinds ['unplug']"),
    ],
)
def test_a_storm_that_cannot_run_is_refused_in_one_line(options: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--seed", "1", "--plan", *options])
    assert message in str(refused.value) and "\n" not in str(refused.value)


# -- the checks catch what they claim to catch -----------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
JOB = {"name": "j", "period": 1, "before": "prepare", "once": "notify", "after": "report"}


def _row(
    rid: int, second: int, status: str = "done", attempt: int = 1, **extra: Any
) -> dict[str, Any]:
    return {
        "id": rid,
        "job_name": "j",
        "fire_time": (T0 + timedelta(seconds=second)).isoformat(),
        "status": status,
        "attempt": attempt,
        "claimed_by": extra.pop("owner", "r0"),
        "lease_until": None,
        "retry_at": None,
        "finished_at": None,
        "error": None,
        **extra,
    }


class History:
    """A small, consistent history (3 occurrences, one orphaned and reclaimed) to spoil."""

    def __init__(self) -> None:
        self.audit: list[tuple[Any, ...]] = []
        self.runs: list[tuple[Any, ...]] = []
        self.receipts: list[tuple[Any, ...]] = []
        self.ledger: list[tuple[Any, ...]] = []
        self.starts: list[tuple[Any, ...]] = []
        self.attempts: list[tuple[Any, ...]] = []  # job_attempts
        self.recovery = RecoveryLog()
        for second in (1, 2, 3):
            self.occurrence(second)

    def event(self, op: str, old: Any, new: Any, tx: int | None = None) -> None:
        self.audit.append((len(self.audit), op, tx or len(self.audit), None, old, new))

    def occurrence(self, second: int) -> None:
        fire, rid = T0 + timedelta(seconds=second), second
        claimed = _row(rid, second, "running")
        self.event("INSERT", None, claimed)
        attempt, owner = 1, "r0"
        if second == 2:  # killed, orphaned, reclaimed by r1
            orphan = {**claimed, "status": "orphaned"}
            self.event("UPDATE", claimed, orphan)
            claimed = {**orphan, "status": "running", "attempt": 2, "claimed_by": "r1"}
            self.event("UPDATE", orphan, claimed)
            self.attempts.append(("j", fire, 1, rid, "r0", "orphaned", None))
            self.starts.append(("j", fire, "r0", 1, fire))
            attempt, owner = 2, "r1"
        self.event("UPDATE", claimed, {**claimed, "status": "done"})
        self.runs.append((rid, "j", fire, "done", attempt, owner, None, fire, None, None, 0, True))
        self.starts.append(("j", fire, owner, attempt, fire))
        for entity in ("prepare", "notify", "report"):
            self.receipts.append((entity, "j", fire, rid, attempt))
            written = f"once:{entity}" if entity == "notify" else entity
            self.ledger.append(("j", fire, written, owner, attempt))

    def check(self, cutoff_second: int = 3) -> list[str]:
        checker = Checker(
            [JOB],
            {"j": T0},
            {"j": T0 + timedelta(seconds=cutoff_second)},
            {"j": ("j", 5, True)},
            self.recovery,
        )
        return checker.check(
            self.runs, self.receipts, self.ledger, self.starts, self.audit, self.attempts
        )

    def replace_run(self, second: int, **changes: Any) -> None:
        """Change the final row of the occurrence at `second` (fields by column name)."""
        columns = ("id", "job_name", "fire_time", "status", "attempt", "claimed_by",
                   "lease_until", "finished_at", "error", "retry_at", "orphan_count", "expired")
        index = next(i for i, r in enumerate(self.runs) if r[2] == T0 + timedelta(seconds=second))
        row = dict(zip(columns, self.runs[index], strict=True))
        self.runs[index] = tuple({**row, **changes}.values())


def test_a_consistent_history_passes_every_check() -> None:
    assert History().check() == []


def test_a_late_completion_from_orphaned_by_the_same_attempt_passes() -> None:
    history = History()
    history.event("UPDATE", _row(2, 2), _row(2, 2))  # nothing changed: no finding
    running = _row(9, 9, "running")
    history.event("INSERT", None, running)
    history.event("UPDATE", running, {**running, "status": "orphaned"})
    history.event("UPDATE", {**running, "status": "orphaned"}, {**running, "status": "done"})
    assert not [line for line in history.check() if "run ('j'" in line]


@pytest.mark.parametrize(
    ("spoil", "expected"),
    [
        (lambda h: h.ledger.append(h.ledger[0]), "happened twice"),
        (lambda h: h.receipts.pop(0), "has no receipt"),
        (lambda h: h.ledger.pop(2), "without the app's write"),
        (lambda h: h.runs.pop(), "never ran and was never recorded"),
        (lambda h: (h.receipts.pop(2), h.ledger.pop(2)), "done without its 'report' effect"),
        (lambda h: h.starts.append(h.starts[-1]), "ran twice"),
        (lambda h: h.starts.append(("j", T0, "r9", 1, T0)), "without being granted"),
        (lambda h: h.event("INSERT", None, _row(99, 1, "running")), "claimed twice"),
        (lambda h: h.event("UPDATE", _row(1, 1), _row(1, 1, "running")), "finished run"),
        (lambda h: h.event("UPDATE", _row(7, 7, "pending"), _row(7, 7)), "done from pending"),
        (
            lambda h: h.event("UPDATE", _row(1, 1, "running"), _row(1, 1, "done")),
            "completed as done 2 times",
        ),
        (
            lambda h: h.event("UPDATE", _row(7, 7, "orphaned"), _row(7, 7, "running", 3)),
            "attempt 1 -> 3",
        ),
        (
            lambda h: h.event("UPDATE", _row(7, 7, "running"), _row(7, 7, "running", owner="r4")),
            "without a new fencing token",
        ),
        (
            lambda h: (
                h.event("DELETE", _row(1, 1), None, tx=500),
                h.event("INSERT", None, _row(1, 1, "running"), tx=500),
            ),
            "maintenance moved run 1 and changed it",
        ),
        (lambda h: h.event("DELETE", _row(3, 3), None, tx=501), "never put back"),
        (
            lambda h: h.runs.append(
                (9, "j", T0, "running", 1, "r0", None, None, None, None, 0, True)
            ),
            "still running past its lease",
        ),
        (
            lambda h: h.runs.append(
                (9, "j", T0, "orphaned", 1, "r0", None, None, "x", None, 1, True)
            ),
            "left orphaned",
        ),
        (
            lambda h: h.runs.append(
                (9, "j", T0, "failed", 2, "r0", None, T0, "boom", None, 0, True)
            ),
            "failed for good after 2 of 5 attempts",
        ),
        (
            lambda h: h.runs.append(
                (9, "j", T0, "skipped", 1, "r0", None, T0, None, None, 0, True)
            ),
            "skipped without a reason",
        ),
    ],
)
def test_every_check_catches_a_planted_violation(spoil: Any, expected: str) -> None:
    history = History()
    spoil(history)
    found = history.check()
    assert any(expected in line for line in found), found


def _at(second: float) -> datetime:
    return T0 + timedelta(seconds=second)


def _fenced_out_failure(history: History) -> None:
    """Attempt 1 of the occurrence at 9 s fenced out, attempt 2 failed as fenced out too."""
    error = "fenced out (claimed by r1, attempt 2): LeaseLost"
    history.runs.append((9, "j", _at(9), "failed", 2, "r1", None, _at(10), error, None, 1, True))
    history.attempts.append(("j", _at(9), 1, 9, "r0", "fenced_out", "fenced out (...)"))


def _paused(history: History, outcome: str) -> None:
    """The attempt that r0 held of the occurrence at 2 s was paused, and kept as `outcome`."""
    history.recovery.paused.append(("j", _at(2), 1, "r0"))
    history.attempts[0] = (*history.attempts[0][:5], outcome, None)


def _fleet_down_skip(history: History) -> None:
    """The fleet down from 2.5 s to 3.5 s; the occurrence at 3 s skipped as missed at 3.6 s,
    when it was the newest one due."""
    history.recovery.fleet_down.append((_at(2.5), _at(3.5)))
    history.replace_run(3, status="skipped", error=MISSED_LATEST, finished_at=_at(3.6))


@pytest.mark.parametrize(
    ("spoil", "expected"),
    [
        (lambda h: h.attempts.clear(), "attempt 1 (r0, orphaned) was superseded without a job_"),
        (lambda h: _paused(h, "fenced_out"), "was kept as fenced_out of r0, its row said orphaned"),
        (lambda h: h.attempts.append(("j", _at(1), 1, 1, "r0", "orphaned", None)),
         "kept, but no later attempt of its run"),
        (_fenced_out_failure, "fenced_out attempt 1 of j @ 12:00:09 (r0) never finished by a"),
        (lambda h: _paused(h, "failed"), "paused on r0, was superseded as failed"),
        (lambda h: h.recovery.killed.append(("j", _at(3), 2, "r0")),
         "attempt 2, killed on r0, was neither superseded nor finished"),
        (lambda h: h.replace_run(3, status="skipped", error=MISSED_NONE),
         "which its policies (Forbid, catchUpPolicy Latest) do not allow"),
        (lambda h: h.replace_run(3, status="skipped", error=FORBID_BUSY.upper()),
         "do not allow"),
        (_fleet_down_skip, "fell while the whole fleet was down and was skipped as missed"),
        (lambda h: h.recovery.fleet_down.append((_at(0.5), _at(1.5))),
         "harness: r0 started j @ 12:00:01 attempt 1 at 12:00:01.000000, while the whole"),
    ],
)
def test_every_recovery_check_catches_a_planted_violation(spoil: Any, expected: str) -> None:
    history = History()
    spoil(history)
    found = history.check()
    assert any(expected in line for line in found), found


def test_a_paused_attempt_superseded_as_orphaned_and_a_fleet_down_caught_up_pass() -> None:
    history = History()
    _paused(history, "orphaned")
    history.recovery.fleet_down.append((_at(1.5), _at(1.9)))  # no occurrence fell meanwhile
    # skipped as missed at 2.5 s, when the occurrence at 2 s was due: Latest ran that one
    history.runs.append((8, "j", _at(1.5), "skipped", 1, "r0", None, _at(2.5), MISSED_LATEST,
                         None, 0, True))
    assert history.check() == []


# -- what the storm found, reduced to its smallest reproduction ------------------------------------


def _waiting_on_locks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()[0]


def test_maintenance_moving_rows_keeps_a_completion_that_commits_meanwhile(dsn: str) -> None:
    """Found by the soak: maintenance moved rows out of the default partition while agents
    updated them (a completion undone, a claim deleted). Fixed: the move locks the partition."""
    store = Store(dsn)
    assert lapse_partition(dsn)
    store.schedules.upsert(job_spec(job_name="j", schedule="@daily", source="cli"))
    store.listings.request_runs("j", [store.db_now()], "manual")
    (lease,) = store.claims.reclaim("a", ["j"], 1)  # running, attempt 1, in the default partition
    results: dict[str, Any] = {}
    with psycopg.connect(dsn) as holder:  # an unrelated transaction that briefly locks the row
        holder.execute("SELECT 1 FROM claimsched.job_runs WHERE id = %s FOR UPDATE", [lease.id])
        completing = threading.Thread(
            target=lambda: results.update(
                recorded=store.claims.complete("a", [Completion(lease, "done")]))
        )
        completing.start()  # the agent records the run as done: it waits for the lock first
        wait_for(lambda: _waiting_on_locks(dsn) == 1, what="the completion to queue")
        maintaining = threading.Thread(
            target=lambda: results.update(summary=store.admin.maintain())
        )
        maintaining.start()  # maintenance stashes the rows, then its DELETE queues behind
        wait_for(lambda: _waiting_on_locks(dsn) == 2, what="maintenance to queue")
    completing.join(10)
    maintaining.join(10)
    store.close()
    assert lease.id in results["recorded"], "the agent was told its completion was recorded"
    assert results["summary"].partitions_created, "maintenance moved the rows"
    (row,) = runs(dsn, "j")
    assert (row["status"], row["attempt"]) == ("done", 1), row


def test_replicas_claiming_the_same_occurrences_in_different_orders_do_not_deadlock(
    dsn: str,
) -> None:
    """Found by the soak (R=10: up to 60 claim deadlocks a minute after healing, each aborting a
    claim after deadlock_timeout); fixed in f06482a by inserting in one global order. Two claims
    that meet in opposite orders are forced to overlap here with a third claim as a gate. Since
    issue 15 a claim try-locks the keys it inserts: the second finds them held and answers
    'contended' at once, without waiting."""
    store = Store(dsn)
    for job in ("x", "gate", "y"):
        spec = job_spec(
            job_name=job,
            schedule="@every 1s",
            concurrency_policy="Allow",
            catch_up_policy="All",
            source="cli",
        )
        store.schedules.upsert(spec)
    fire = (store.db_now() + timedelta(seconds=1)).replace(microsecond=0)  # after active_since
    wait_for(lambda: store.db_now() > fire, what="the occurrence to be due")
    outcomes: dict[str, Any] = {}

    def claim(agent: str, order: list[str]) -> None:
        try:
            candidates = [c for j in order for c in due(store, j, fire)]
            _, results = store.claims.claim(agent, candidates, 10)
            outcomes[agent] = sorted(r.outcome for r in results)
        except Exception as exc:
            outcomes[agent] = repr(exc)

    with psycopg.connect(dsn) as gate:  # a third claimer holds "gate" until both queue on it
        gate.execute(
            "INSERT INTO claimsched.job_runs (job_name, fire_time, status) VALUES ('gate', %s, "
            "'skipped')",
            [fire],
        )
        threads = [
            threading.Thread(target=claim, args=("a", ["x", "gate", "y"])),
            threading.Thread(target=claim, args=("b", ["y", "gate", "x"])),
        ]
        for thread in threads:
            thread.start()
        wait_for(lambda: _waiting_on_locks(dsn) + len(outcomes) == 2,
                 what="both claims to wait on the gate (or to pass it by)")
        gate.rollback()
    for thread in threads:
        thread.join(10)
    store.close()
    assert all(isinstance(v, list) for v in outcomes.values()), outcomes
    claimed = Counter(r["job_name"] for r in runs(dsn))
    assert claimed == {"x": 1, "gate": 1, "y": 1}


def test_a_replica_coming_back_claims_a_forbid_jobs_next_occurrence_without_walking_history(
    dsn: str,
) -> None:
    """Found by the soak: a Forbid job with catchUpPolicy All walked its history one claim
    statement per occurrence. Fixed: the database lets only the oldest free one run."""
    from claimsched import Agent

    store = Store(dsn)
    store.schedules.upsert(
        job_spec(
            job_name="walk",
            schedule="@every 1s",
            concurrency_policy="Forbid",
            catch_up_policy="All",
            source="cli",
        )
    )
    with psycopg.connect(dsn, autocommit=True) as conn:  # 100 s of history, all of it done
        conn.execute(
            "UPDATE claimsched.job_schedule SET active_since = now() - interval '101 seconds'"
        )
        conn.execute(
            "INSERT INTO claimsched.job_runs (job_name, fire_time, status, finished_at) "
            "SELECT 'walk', t, 'done', now() FROM generate_series(date_trunc('second', now()) "
            "- interval '100 seconds', date_trunc('second', now()), interval '1 second') t"
        )
    store.close()
    agent = Agent(dsn, agent_id="back", housekeeping_seconds=0.3, shutdown_grace_seconds=1)
    statements: list[int] = []
    claim = agent.store.claims.claim

    def counted(*args: Any, **kwargs: Any) -> Any:
        statements.append(1)
        return claim(*args, **kwargs)

    agent.store.claims.claim = counted  # type: ignore[method-assign]
    agent.job("walk")(lambda run: None)
    with agent:
        wait_for(
            lambda: any(r["claimed_by"] == "back" for r in runs(dsn, "walk")),
            timeout=30,
            what="the first new occurrence",
        )
        used = len(statements)
    assert used <= 5, f"{used} claim statements before the first new occurrence"


@pytest.mark.parametrize("policy", ["Forbid", "Allow"])
def test_catch_up_all_runs_every_missed_occurrence_inside_the_window(dsn: str, policy: str) -> None:
    """Found by the soak: catch-up looked at the newest 100 missed occurrences only, older
    ones got no row. Fixed: a longer backlog is settled oldest first, 100 a pass."""
    from claimsched import Agent

    store = Store(dsn)
    store.schedules.upsert(
        job_spec(
            job_name="j",
            schedule="@every 1s",
            concurrency_policy=policy,
            catch_up_policy="All",
            source="cli",
        )
    )
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:  # every replica was down for 150 s
        conn.execute(
            "UPDATE claimsched.job_schedule "
            "SET active_since = date_trunc('second', now()) - interval '150 seconds'"
        )
    agent = Agent(
        dsn, agent_id="back", housekeeping_seconds=0.3, max_concurrency=8, shutdown_grace_seconds=1
    )
    agent.job("j")(lambda run: None)
    with psycopg.connect(dsn) as conn:
        since = conn.execute("SELECT active_since FROM claimsched.job_schedule").fetchone()[0]  # type: ignore[index]
    with agent:  # the present occurrence is claimed once the backlog is worked off (or skipped)
        wait_for(
            lambda: any(r["fire_time"] >= since + timedelta(seconds=150) for r in runs(dsn, "j")),
            timeout=30,
            what="the catch-up to reach the present",
        )
    fires = [r["fire_time"] for r in runs(dsn, "j")]
    assert fires[0] == since + timedelta(seconds=1), f"the oldest row is {fires[0] - since} late"


# -- the harness itself ----------------------------------------------------------------------------


def test_skew_faults_that_fall_together_each_leave_a_whole_offset(tmp_path: Path) -> None:
    # Seed 11 (soak) drew two skews 90 ms apart: each fault runs in its own thread.
    run = ChaosRun(ci_config(11), tmp_path)
    failures: list[BaseException] = []

    def skew(value: int) -> None:
        try:
            for _ in range(200):
                run._write_skew(value)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=skew, args=(v,)) for v in range(-4, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
    assert (tmp_path / "skew").read_text() in {f"{v:+d}s\n" for v in range(-4, 4)}
