"""Randomized chaos: R real agent processes, J jobs, random overlapping faults, then invariants.

One seed fixes everything the harness decides: the jobs (period, policy, handler), the fault
schedule (when, what, which replica, how long) and the skewed replica's clock; the recovery
faults (recovery.py) pick their replica when they run, by what job_runs says then. What the
agents do in between is real concurrency, so a replay of a seed re-creates the same storm, not
the same interleaving. Every run ends the same way: heal every fault, wait until every job caught
up, disable the schedules, wait until nothing is left to do, stop the replicas gracefully, and
check the invariants against the claim table, the receipts, the app's ledger and the audit trail
(and, in timeline.py, those about time: Forbid runs never in progress at once, what became of
handlers that finished while Postgres was away, receipts never committed after a later attempt
began; in recovery_checks.py, those about superseded attempts and what the recovery faults
left behind).

Replay a seed: python -m bench.chaos --seed 31 --replicas 5 --jobs 20 --duration 22
(with --ha on a synchronous Patroni cluster, where failovers replace the standalone server's
restarts and outages; see bench/chaos/__init__.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from claimsched.db import Store
from claimsched.errors import ClaimschedError
from claimsched.schedule.specs import job_spec
from claimsched.tools.postgres import TemporaryPostgres
from claimsched.tools.processes import python_path

from ..ha.blackhole import Blackhole
from ..ha.patroni import PatroniCluster, patroni_cluster
from ..ha.pgbouncer import Pgbouncer
from ..releases import isolated_env, previous
from . import app_sql
from .faults import FLEET, GRACE, STARTUP, Event, Fault, Lanes, Slot
from .harness import REPO, Replica, Replicas
from .recovery import (
    BACKFILL_WAIT,
    FLEET_DOWN,
    KILL_BACKFILLER,
    PAUSE_RECLAIMER,
    RECLAIMED_WAIT,
    RECOVERY_FAULTS,
    RecoveryFaults,
    plan_recovery,
    retried_job,
)
from .recovery_checks import RecoveryChecks, RecoveryLog, Superseded, fenced_out
from .timeline import TimeChecks, Timeline, Trace
from .upgrade import ROLLING_UPGRADE, plan_upgrade, roll

REPLICA_FAULTS = ("sigkill", "sigstop", "sigterm", "new_id")
PG_FAULTS = ("pg_restart", "pg_outage", "long_outage")  # long_outage: longer than every lease
MANUAL_FAULTS = ("trigger", "backfill")  # manual runs of Forbid jobs, as an operator asks them
# The replicas of the odd slots (r1, r3, ...) reach the database through pgbouncer in
# transaction mode (bench/ha/pgbouncer.py; on a Patroni cluster, pointed at the leader and moved
# after each failover, as a role-change callback would); the pooler is killed
# (every connection through it drops, mid-transaction) and started again after a few seconds,
# or paused (the transactions in flight finish, every new one waits) for up to longer than a
# lease, then resumed.
POOLER = "pooler"
# RECOVERY_FAULTS (recovery.py): the owner of a reclaimed run paused past its lease, a backfill's
# worker killed, the whole fleet down for longer than every period
FAULT_KINDS = (
    *REPLICA_FAULTS, *PG_FAULTS, "skew", *MANUAL_FAULTS, "freeze_in_once", *RECOVERY_FAULTS,
    POOLER,
)
# A replica's database connections black-holed (no reset) for longer than every lease; any
# database. The Patroni leader lost (SIGKILL of its Patroni, postmaster and children; the
# synchronous standby is promoted, the dead node rejoins) or switched over: --ha only, where it
# replaces the faults of the one standalone server (PG_FAULTS).
PARTITION, FAILOVER = "partition", "failover"
HA_KINDS = (
    *REPLICA_FAULTS, PARTITION, FAILOVER, "skew", *MANUAL_FAULTS, "freeze_in_once",
    *RECOVERY_FAULTS, POOLER,
)
# The storm begins on the previous release and is upgraded to this one first (upgrade.py):
# asked for by name only, never drawn by default.
ALL_KINDS = (*FAULT_KINDS, PARTITION, FAILOVER, ROLLING_UPGRADE)
DB_FAULTS = (*PG_FAULTS, FAILOVER)  # one at a time on the "postgres" lane
WEIGHTS = {
    "sigkill": 3,
    "sigstop": 3,
    "sigterm": 2,
    "new_id": 1,
    "pg_restart": 1,
    "pg_outage": 1,
    "long_outage": 1,
    "skew": 2,
    "trigger": 2,
    "backfill": 2,
    "freeze_in_once": 1,
    PARTITION: 2,
    POOLER: 1,
    FAILOVER: 0.6,  # each takes the database away for seconds (switchover) or ~30 s (SIGKILL)
    PAUSE_RECLAIMER: 2,
    KILL_BACKFILLER: 1,
    FLEET_DOWN: 0.5,  # every replica's lane at once
}
# Planned seconds of a failover on the "postgres" lane (Patroni's ttl of 20 s, then the dead
# node's rejoin: a strict synchronous cluster takes no commit until a standby is back), and the
# healthy time after it before the next database fault.
FAILOVER_SECONDS = {0: 10.0, 1: 35.0}
FAILOVER_SLACK = 15.0
# How long after a database fault ended a replica that refuses to start for want of a database is
# a restart (the kubelet's), not a crash. A promoted primary takes every replica's reconnection
# and catch-up and its new standby's first sync at once: on a loaded machine a connection can
# time out for a while after the failover (seen: 12.5 s after a switchover, load average 30).
SETTLE_AFTER_DB_FAULT = {False: 10.0, True: 30.0}  # by cfg.ha
# The jobs the newer faults need: Forbid jobs that overrun their period (some their lease), with
# work after their last effect (a handler that finishes while Postgres is away), and jobs whose
# once() block freezes its replica on the harness's word. They replace the last jobs of a plan.
OVERRUN_FOR = {"trigger", "backfill", "long_outage", KILL_BACKFILLER}
# Faults that wait for their moment reading job_runs (`WATCHING` seconds after they start): no
# database fault is on meanwhile
WATCHING = {PAUSE_RECLAIMER: RECLAIMED_WAIT, KILL_BACKFILLER: BACKFILL_WAIT}
FREEZE_FOR = {"freeze_in_once"}
RETRIED_FOR = {PAUSE_RECLAIMER}  # a job whose second attempts run long (recovery.retried_job)
MAX_SKEW = 300  # seconds, either way
TAIL_WAIT = 4.0  # seconds a long outage may wait for a handler's tail before it begins
TERMINAL = ("done", "skipped")
UNFINISHED = ("running", "orphaned", "pending")


# -- the plan: jobs and faults from one seed -------------------------------------------------------


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    replicas: int = 5
    jobs: int = 20
    duration: float = 22.0  # seconds of faults; healing and checks come on top
    fault_rate: float = 0.5  # faults per second of `duration`, at least one of each kind
    kinds: tuple[str, ...] = FAULT_KINDS
    max_concurrency: int = 6
    maintenance_every: tuple[float, float] = (2.0, 6.0)  # seconds between concurrent maintains
    lapse_partitions: bool = False  # start with this month's partition missing (see test)
    settle_timeout: float = 60.0  # catch-up and quiescence deadlines, each
    pg_settings: tuple[tuple[str, str], ...] = ()
    ha: bool = False  # a Patroni cluster (synchronous, strict) instead of one server

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(ALL_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}: choose from {', '.join(ALL_KINDS)}")
        if self.ha and set(self.kinds) & set(PG_FAULTS):
            raise ValueError(
                f"{', '.join(PG_FAULTS)} stop the one standalone server: with --ha the database "
                f"fault is {FAILOVER}"
            )
        if not self.ha and FAILOVER in self.kinds:
            raise ValueError(f"{FAILOVER} needs a Patroni cluster: add --ha")
        if POOLER in self.kinds and self.replicas < 2:
            raise ValueError(f"{POOLER} puts the odd replicas behind a pooler: it needs two")


def plan_jobs(rng: random.Random, count: int, kinds: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """J chaos jobs: @every 1-3 s, Forbid or Allow, short, long, flaky or doomed handlers; the
    last ones overrun, freeze or are retried when the fault `kinds` need such jobs (drawn from a
    random source of their own, so the other jobs of a seed stay what they were)."""
    jobs = _plain_jobs(rng, count)
    overrun = max(1, count // 8) if OVERRUN_FOR & set(kinds) else 0
    frozen = 1 + count // 30 if FREEZE_FOR & set(kinds) else 0
    retried = 1 if RETRIED_FOR & set(kinds) else 0
    if not overrun + frozen + retried:
        return jobs
    extra = random.Random(rng.random())
    specials = (
        [_overrun_job(extra) for _ in range(overrun)]
        + [_frozen_job(extra) for _ in range(frozen)]
        + [retried_job(extra) for _ in range(retried)]
    )
    kept = jobs[: max(0, count - len(specials))]
    for index, job in enumerate(specials[: count], start=len(kept)):
        job["name"] = f"j{index:02d}-{job['name']}"
    return kept + specials[:count]


def _overrun_job(rng: random.Random) -> dict[str, Any]:
    """Forbid, runs longer than its period (half of them longer than their lease too), then
    works on after its last effect."""
    period, lease = rng.choice([1, 2]), rng.choice([3, 4, 5])
    sleep = rng.uniform(lease + 0.5, lease + 2.5) if rng.random() < 0.5 else rng.uniform(
        1.5 * period, 2.5 * period
    )
    return {
        "name": "overrun-forbid",
        "kind": "chaos",
        "period": period,
        "schedule": f"@every {period}s",
        "concurrency_policy": "Forbid",
        "catch_up_policy": "Latest",
        "lease_seconds": lease,
        "heartbeat_seconds": 1,
        "retry_on_failure": True,
        "max_attempts": 5,
        "before": "prepare",
        "sleep": round(sleep, 1),
        "once": "notify",
        "once_sleep": round(rng.uniform(0.1, 0.3), 2),
        "after": "report",
        "tail": round(rng.uniform(0.5, 1.5), 1),
    }


def _frozen_job(rng: random.Random) -> dict[str, Any]:
    """A short job whose once() block calls out, then freezes its replica when told to."""
    policy = rng.choice(["Forbid", "Allow"])
    period = rng.choice([2, 3])
    return {
        "name": f"frozen-{policy.lower()}",
        "kind": "chaos",
        "period": period,
        "schedule": f"@every {period}s",
        "concurrency_policy": policy,
        "catch_up_policy": "All" if policy == "Allow" else "Latest",
        "lease_seconds": rng.choice([3, 4]),
        "heartbeat_seconds": 1,
        "retry_on_failure": True,
        "max_attempts": 5,
        "sleep": round(rng.uniform(0, 0.2), 2),
        "once": "notify",
        "once_sleep": 0.05,
        "after": "report",
        "freeze": True,
    }


def _plain_jobs(rng: random.Random, count: int) -> list[dict[str, Any]]:
    jobs = []
    for index in range(count):
        kind = rng.choices(["short", "long", "flaky", "doomed"], weights=[6, 3, 2, 1])[0]
        policy = rng.choice(["Forbid", "Allow"])
        period = rng.choice([2, 3]) if kind == "long" else rng.choice([1, 2, 3])
        job: dict[str, Any] = {
            "name": f"j{index:02d}-{kind}-{policy.lower()}",
            "kind": "chaos",
            "period": period,
            "after": "report",
            "schedule": f"@every {period}s",
            "concurrency_policy": policy,
            "catch_up_policy": "All" if policy == "Allow" else rng.choice(["All", "Latest"]),
            "lease_seconds": rng.choice([3, 4, 5]),
            "heartbeat_seconds": 1,
            "retry_on_failure": True,
            "max_attempts": 5,
        }
        if kind == "short":
            job["sleep"] = round(rng.uniform(0, 0.2), 2)
            if rng.random() < 0.5:
                job["before"] = "prepare"
            if rng.random() < 0.4:
                job.update(once="notify", once_sleep=round(rng.uniform(0, 0.1), 2))
        elif kind == "long":
            job.update(sleep=round(rng.uniform(1.2, 3.5), 1), before="prepare", once="notify")
            job["once_sleep"] = round(rng.uniform(0.2, 1.0), 1)
            job["catch_up_policy"] = "All" if policy == "Allow" else "Latest"
        elif kind == "flaky":
            job.update(sleep=round(rng.uniform(0, 0.3), 2), before="prepare")
            job.update(fail_every=2, fail_attempts=1)
        else:
            job.update(fail_every=3, fail_attempts=99, max_attempts=2)
        jobs.append(job)
    return jobs


SCHEDULE_KEYS = (
    "schedule",
    "concurrency_policy",
    "catch_up_policy",
    "lease_seconds",
    "heartbeat_seconds",
    "retry_on_failure",
    "max_attempts",
)


def app_jobs(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the replicas get: handlers only; the schedules are declared like `claimsched apply`."""
    return [{k: v for k, v in job.items() if k not in SCHEDULE_KEYS} for job in jobs]


def plan_faults(
    rng: random.Random,
    cfg: ChaosConfig,
    slots: list[str],
    skewed: str,
    jobs: list[dict[str, Any]],
) -> list[Fault]:
    """A seeded schedule of overlapping faults: every kind at least once, the rest weighted.

    A replica has one fault at a time and at least one replica is never faulted at any instant,
    but while the whole fleet is down (FLEET_DOWN: every replica's lane, drawn early); Postgres
    has one fault at a time, a frozen job one freeze at a time, and no database fault is on
    while a WATCHING fault waits. A rolling upgrade, when asked for, comes first and holds
    every lane, the database's too: no other fault starts before it ends (upgrade.py). Faults on
    different targets overlap freely. Each fault
    reserves its lane (faults.py) until `until`. A fault that does not fit where it was drawn
    moves later, then earlier; one that fits nowhere is left out. Manual runs go to Forbid jobs,
    overrunning ones first.
    """
    lease_max = max(j["lease_seconds"] for j in jobs)
    period_max = max(j["period"] for j in jobs)
    forbid = [j["name"] for j in jobs if j["concurrency_policy"] == "Forbid"]
    overrun = [j["name"] for j in jobs if "overrun" in j["name"]] or forbid
    frozen = {j["name"]: j for j in jobs if j.get("freeze")}
    kinds = [k for k in cfg.kinds if (k != "freeze_in_once" or frozen) and k != ROLLING_UPGRADE]
    busy: dict[str, list[tuple[float, float]]] = defaultdict(list)
    faults = []
    first = 0.5  # where the drawn faults may start
    if ROLLING_UPGRADE in cfg.kinds:
        duration, slack = plan_upgrade(len(slots))
        until = first + duration + slack
        for lane in [*slots, "postgres"]:
            busy[lane].append((first, until))
        faults.append(
            Fault(first, ROLLING_UPGRADE, FLEET, round(duration, 2), 0.0, round(until, 2))
        )
        first = until
    if not kinds:
        return faults
    total = max(len(kinds), round(cfg.duration * cfg.fault_rate))
    extras = rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds], k=total - len(kinds))
    rng.shuffle(kinds)
    # the first whole fleet down comes early (it needs every replica's lane)
    draws = [
        (rng.uniform(0.5, cfg.duration * (0.1 if (kind, n) == (FLEET_DOWN, 0) else 0.8)), kind)
        for n, kind in zip([0] * len(kinds) + [1] * len(extras), kinds + extras, strict=True)
    ]
    draws[: len(kinds)] = sorted(draws[: len(kinds)], key=lambda draw: _placed_first(draw[1]))
    backfills: Counter[str] = Counter()  # kill_backfiller's ranges per job, each its own
    outages: list[tuple[float, float]] = []  # the database faults' own spans, slack aside
    watches: list[tuple[float, float]] = []  # the WATCHING faults' waits

    def overlaps(target: str, low: float, high: float) -> bool:
        return any(a < high and low < b for a, b in busy[target])

    def most_at_once(low: float, high: float) -> int:
        """The most replica lanes reserved at one instant between low and high."""
        instants = [low] + [a for s in slots for a, _ in busy[s] if low < a < high]
        return max(sum(1 for s in slots if overlaps(s, t, t + 1e-6)) for t in instants)

    for drawn, kind in draws:  # the one-of-each draws come first: they always find room
        value, job = 0.0, ""
        if kind == "sigkill":
            duration, slack = rng.uniform(0.5, 4.0), STARTUP
        elif kind == "sigstop":
            duration, slack = lease_max + rng.uniform(1.0, 3.0), 1.0
        elif kind == "sigterm":
            duration, slack = rng.uniform(0.0, 1.0), GRACE + STARTUP + 1.0
        elif kind == "new_id":
            duration, slack, value = rng.uniform(0.5, 3.0), STARTUP + GRACE, rng.choice([0, 1])
        elif kind == "pg_restart":
            duration, slack = 0.0, 2.0
        elif kind == "pg_outage":
            duration, slack = rng.uniform(period_max + 0.5, period_max + 3.0), 2.0
        elif kind in ("long_outage", PARTITION):  # longer than every lease
            duration, slack = rng.uniform(lease_max + 1.0, lease_max + 3.0), 2.0
        elif kind == POOLER:  # value 1: paused, up to longer than a lease; 0: killed
            value = float(rng.choice([0, 1]))
            duration = rng.uniform(1.0, lease_max + 3.0) if value else rng.uniform(0.5, 4.0)
            slack = 2.0
        elif kind == FAILOVER:  # value 1: SIGKILL of the leader, 0: a planned switchover
            value = float(rng.choice([0, 1]))
            duration, slack = FAILOVER_SECONDS[int(value)], FAILOVER_SLACK
        elif kind in MANUAL_FAULTS:
            # backfill: its range ends `value` periods before the schedule began (-1: just now)
            duration, slack, value = 0.0, 0.0, float(rng.choice([-1, 0, 2, 4, 6, 8]))
            pick = rng.choice(overrun if rng.random() < 0.7 else forbid)
        elif kind == "freeze_in_once":
            pick = rng.choice(sorted(frozen))
            lease = frozen[pick]["lease_seconds"]
            duration, slack = rng.uniform(lease + 0.5, lease + 3.0), 2.0 * frozen[pick]["period"]
        elif kind in RECOVERY_FAULTS:
            duration, slack, value, job = plan_recovery(kind, rng, jobs, len(slots), backfills)
        else:
            duration, slack, value = 0.0, 0.0, float(rng.randint(-MAX_SKEW, MAX_SKEW))
        target = None
        for at in _instants(max(drawn, first), first, cfg.duration * 0.9):
            low, high = at, at + duration + slack
            if kind in DB_FAULTS:
                down = outage(kind, low, duration)
                clear = not overlaps("postgres", low, high) and not any(
                    a < down[1] and down[0] < b for a, b in watches
                )
                target = "postgres" if clear else None
            elif kind == "skew":
                target = skewed
            elif kind == POOLER:
                target = None if overlaps(POOLER, low, high) else POOLER
            elif kind in MANUAL_FAULTS:
                target = pick
            elif kind == "freeze_in_once":
                target = None if overlaps(pick, low, high) else pick
            elif kind == FLEET_DOWN:
                target = None if any(overlaps(s, low, high) for s in slots) else FLEET
            elif kind in WATCHING and any(
                a < low + WATCHING[kind] and low < b for a, b in outages
            ):
                target = None
            else:
                free = [s for s in slots if not overlaps(s, low, high)]
                if free and most_at_once(low, high) < len(slots) - 1:
                    target = rng.choice(free)
            if target is not None:
                break
        if target is None:
            continue
        until = 0.0
        if kind in DB_FAULTS:
            outages.append(outage(kind, at, duration))
        if kind in WATCHING:
            watches.append((at, at + WATCHING[kind]))
        if kind not in ("skew", *MANUAL_FAULTS):
            until = at + duration + slack
            for lane in slots if target == FLEET else [target]:
                busy[lane].append((at, until))
        faults.append(
            Fault(round(at, 2), kind, target, round(duration, 2), value, round(until, 2), job)
        )
    return sorted(faults, key=lambda f: f.at)


def outage(kind: str, at: float, duration: float) -> tuple[float, float]:
    """When a database fault planned at `at` may keep Postgres from answering: a long outage
    may begin only once a handler began its tail, a restart takes a second, and a server
    started again answers a second later."""
    begins = TAIL_WAIT if kind == "long_outage" else 0.0
    return at, at + begins + max(duration, 1.0) + 1.0


def _placed_first(kind: str) -> int:
    """The order in which the one-of-each draws are placed: the whole fleet first, then by
    the time each holds its replica lane, shortest first (the longest start last, wherever a
    lane is left: only the start of a fault must fall inside the storm); a failover last: it
    takes the database away for most of an HA storm, and keeps out of the waits of the faults
    that watch job_runs (WATCHING) that came before it."""
    order = (FLEET_DOWN, "sigkill", "sigterm", "new_id", "long_outage", PARTITION, "sigstop",
             KILL_BACKFILLER, PAUSE_RECLAIMER, FAILOVER)
    return order.index(kind) if kind in order else len(order)


def _instants(drawn: float, first: float, last: float) -> Iterator[float]:
    """Where a fault drawn at `drawn` may go: there, then later in steps of 1.5 s up to `last`,
    then earlier down to `first`."""
    later = drawn
    while later < last:
        yield later
        later += 1.5
    earlier = drawn - 1.5
    while earlier >= first:
        yield earlier
        earlier -= 1.5


def plan(cfg: ChaosConfig) -> tuple[list[dict[str, Any]], str, float, list[Fault], list[float]]:
    """Everything a seed decides: jobs, the skewed replica and its first offset, the faults,
    and the pauses between concurrent maintenance runs."""
    rng = random.Random(cfg.seed)
    jobs = plan_jobs(rng, cfg.jobs, cfg.kinds)
    slots = [f"r{i}" for i in range(cfg.replicas)]
    skewed = rng.choice(slots)
    initial_skew = float(rng.randint(-MAX_SKEW, MAX_SKEW))
    faults = plan_faults(rng, cfg, slots, skewed, jobs)
    pauses = [rng.uniform(*cfg.maintenance_every) for _ in range(int(cfg.duration * 4) + 50)]
    return jobs, skewed, initial_skew, faults, pauses


# -- replicas as a kubelet would run them ----------------------------------------------------------


class ChaosRun:
    """Runs one seed end to end and returns its report (violations included, never raised)."""

    def __init__(self, cfg: ChaosConfig, folder: Path, log: Any = None) -> None:
        self.cfg = cfg
        self.folder = folder
        self.say = log or (lambda text: None)
        self.jobs, self.skewed, self.initial_skew, self.faults, self.maintenance_waits = plan(cfg)
        self.slots_names = [f"r{i}" for i in range(cfg.replicas)]
        self.events: list[Event] = []
        self.violations: list[str] = []
        self.notes: Counter[str] = Counter()
        self.pg_lock = threading.Lock()
        self.skew_lock = threading.Lock()  # skew faults write one file
        self.pooler_lock = threading.Lock()  # one pooler fault or move at a time
        self.pg_down = False
        self.pg_fault_ended = -1e9
        self.pg: TemporaryPostgres | None = None  # the database: one server,
        self.ha: PatroniCluster | None = None  # or with cfg.ha a Patroni cluster
        self.pooler: Pgbouncer | None = None  # with POOLER
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.mono_to_wall = time.time() - time.monotonic()  # the handlers trace monotonic time
        self.trace_dir = folder / "trace"
        self.freeze_lock = threading.Lock()  # one frozen handler at a time
        self.maintenance: Counter[str] = Counter()
        self.finished_seen: dict[int, tuple[Any, ...]] = {}
        self.recovery = RecoveryFaults(self)
        # the previous release's agents until a rolling upgrade; this release's schema from then
        self.release = previous() if ROLLING_UPGRADE in cfg.kinds else None
        self.migrated = threading.Event()
        self.history_from = 0  # upgrade.py: where the audit trail's attempts have a history
        self._lock = threading.Lock()
        # the tables the Python checks read: the wide soak (bench/chaos/wide.py) points them at
        # views of its heavy jobs only, and checks its light jobs in SQL
        self.scope = {
            "runs": "claimsched.job_runs",
            "effects": "claimsched.job_effects",
            "attempts": "claimsched.job_attempts",
        }
        self.extra_jobs: list[dict[str, Any]] = []  # jobs the Python checks do not read
        self.setup_sql = "SELECT 1"  # after app_sql's tables: the wide soak's views

    # -- helpers ---------------------------------------------------------------------------------

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)
        self.say(f"VIOLATION: {text}")

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        # commit times order receipts against the grants of later attempts (timeline.py)
        settings = {
            "max_connections": "400",
            "track_commit_timestamp": "on",
            **dict(self.cfg.pg_settings),
        }
        with self._database(settings):
            self._setup()
            self.group = Replicas(self.dsn, self.folder, app_jobs(self.jobs + self.extra_jobs),
                                  self._env())
            self.slots = {
                name: Slot(
                    name, name, self.folder / "skew" if name == self.skewed else None, ids=[name],
                    release=self.release,
                )
                for name in self.slots_names
            }
            self.lanes = Lanes(self.faults, self.slots)
            self._write_skew(self.initial_skew)
            try:
                if POOLER in self.cfg.kinds:
                    self._pool()
                if PARTITION in self.cfg.kinds:
                    for slot in self.slots.values():
                        self._proxy(slot)
                for slot in self.slots.values():
                    self.launch(slot)
                self._wait_ready()
                self.t0, self.wall0 = time.monotonic(), time.time()
                threads = [
                    threading.Thread(target=self._kubelet, name="chaos-kubelet", daemon=True),
                    threading.Thread(target=self._maintain, name="chaos-maintain", daemon=True),
                ]
                for thread in threads:
                    thread.start()
                self._storm()
                self._heal()
                cutoff = self._catch_up()
                self.query("UPDATE claimsched.job_schedule SET enabled = false")
                self._quiesce()
                self.stop.set()
                for thread in threads:
                    thread.join(30)
                self._maintain_once("final")
                self._shutdown()
                report = self._check(cutoff)
            finally:
                self.stop.set()
                self.group.stop_all()
                for slot in self.slots.values():
                    for proxy in slot.proxies:
                        proxy.close()
                if self.pooler is not None:
                    self.pooler.remove()
        report["elapsed_seconds"] = round(time.monotonic() - started, 1)
        return report

    @contextmanager
    def _database(self, settings: dict[str, str]) -> Iterator[None]:
        """One throwaway server, or with `ha` a Patroni cluster (etcd, two nodes, synchronous and
        strict) that the harness and the agents reach by a DSN naming both nodes."""
        if self.cfg.ha:
            with patroni_cluster(parameters=settings) as cluster:
                # 5 s: a promoted primary under every replica's reconnection is slow to answer
                self.ha, self.dsn = cluster, cluster.dsn(connect_timeout="5")
                yield
        else:
            with TemporaryPostgres(settings=settings) as pg:
                self.pg, self.dsn = pg, pg.dsn
                yield

    def _primary(self) -> str:
        """A direct DSN of the primary: the standalone server, or the Patroni leader."""
        if self.ha is None:
            return self.dsn
        leader = self.ha.leader()
        assert leader is not None, self.ha.logs()
        return self.ha.members[leader].dsn

    def _pool(self) -> None:
        """A pgbouncer in front of the primary; the odd slots' replicas reach the database
        through it (poll mode: nothing lasts beyond a transaction)."""
        self.pooler = Pgbouncer(self._primary(), pool_size=40, max_client_conn=2000)
        self.pooler.start()
        for index, slot in enumerate(self.slots.values()):
            if index % 2:
                slot.dsn = make_conninfo(self.dsn, host="127.0.0.1", port=str(self.pooler.port))

    def _proxy(self, slot: Slot) -> None:
        """Put every connection of the slot's replicas behind black-hole proxies, one per node
        (in front of the poolers, for a pooled slot)."""
        ports = [int(p) for p in str(conninfo_to_dict(slot.dsn or self.dsn)["port"]).split(",")]
        slot.proxies = [Blackhole(port) for port in ports]
        slot.dsn = make_conninfo(slot.dsn or self.dsn,
                                 port=",".join(str(p.port) for p in slot.proxies))

    def _env(self) -> dict[str, str]:
        return {
            "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",
            "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": str(GRACE),
            "CLAIMSCHED_RETRY_BACKOFF_SECONDS": "0.3",
            "CLAIMSCHED_MAX_CONCURRENCY": str(self.cfg.max_concurrency),
            "CLAIMSCHED_LOG_LEVEL": "DEBUG",
            "APP_TRACE_DIR": str(self.trace_dir),
        }

    def _setup(self) -> None:
        self.trace_dir.mkdir(exist_ok=True)
        store = Store(self.dsn)
        try:
            if self.release is None:
                store.admin.migrate()
                self.migrated.set()
            else:
                subprocess.run(self.release.command("migrate", "--dsn", self.dsn), check=True,
                               capture_output=True, env=isolated_env())
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(app_sql.LEDGER)
                conn.execute(app_sql.AUDIT)
                conn.execute(self.setup_sql)
            if self.cfg.lapse_partitions:
                self._lapse()
            for job in self.jobs + self.extra_jobs:
                fields = {k: job[k] for k in SCHEDULE_KEYS}
                store.schedules.upsert(job_spec(job_name=job["name"], source="cli", **fields))
        finally:
            store.close()  # its pool's threads would outlive the run until a garbage collection
        self.active_since = {
            name: since
            for name, since in self.query(
                "SELECT job_name, active_since FROM claimsched.job_schedule"
            )
        }

    def _lapse(self) -> None:
        if lapse_partition(self.dsn):
            self.notes["partition_lapses"] += 1

    def _write_skew(self, seconds: float) -> None:
        # libfaketime re-reads the file while the replica runs: replace it atomically, so it
        # never sees a half-written offset (it exits the process on one it cannot parse).
        # Two skew faults can fall within milliseconds, each in its own thread: one at a time.
        with self.skew_lock:
            partial = self.folder / "skew.tmp"
            partial.write_text(f"{int(seconds):+d}s\n")
            os.replace(partial, self.folder / "skew")

    def launch(self, slot: Slot) -> None:
        slot.incarnation += 1
        slot.replica = self.group.start(
            slot.agent_id,
            skew_file=slot.skew_file,
            log_name=f"{slot.agent_id}.{slot.incarnation}",
            release=slot.release,
            **({"CLAIMSCHED_DSN": slot.dsn} if slot.dsn else {}),
        )

    def started(self, slot: Slot) -> bool:
        return slot.replica is not None and "agent started" in slot.replica.output()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while not all(self.started(s) for s in self.slots.values()):
            for slot in self.slots.values():
                if slot.replica is not None and not slot.replica.alive:
                    raise RuntimeError(f"{slot.agent_id} did not start:\n{slot.replica.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError("replicas did not start within 60 s:\n" + self.group.dump())
            time.sleep(0.1)

    # -- faults ----------------------------------------------------------------------------------

    def _storm(self) -> None:
        """Start each fault at its time (each in its own thread, so they overlap); the next
        after a rolling upgrade only once the upgrade has ended."""
        running: list[threading.Thread] = []
        for fault in self.faults:
            if self.stop.wait(max(0.0, fault.at - (time.monotonic() - self.t0))):
                break
            thread = threading.Thread(
                target=self._fault, args=(fault,), name=f"chaos-{fault.kind}", daemon=True
            )
            thread.start()
            if fault.kind == ROLLING_UPGRADE:  # no other fault meets the previous release
                thread.join()
            running.append(thread)
            running = [t for t in running if t.is_alive()]
        self.stop.wait(max(0.0, self.cfg.duration - (time.monotonic() - self.t0)))
        for thread in running:
            thread.join(60)
            if thread.is_alive():
                self.violation(f"fault thread {thread.name} did not finish within 60 s")

    def _fault(self, fault: Fault) -> None:
        event = Event(self.now(), fault.kind, fault.target)
        try:
            if fault.kind in PG_FAULTS:
                self._pg_fault(fault, event)
            elif fault.kind == FAILOVER:
                self._failover(fault, event)
            elif fault.kind == PARTITION:
                self._partition(fault, event)
            elif fault.kind == POOLER:
                self._pooler_fault(fault, event)
            elif fault.kind in MANUAL_FAULTS:
                self._manual_fault(fault, event)
            elif fault.kind == "freeze_in_once":
                self._freeze_fault(fault, event)
            elif fault.kind in RECOVERY_FAULTS:
                self.recovery.run(fault, event)
            elif fault.kind == ROLLING_UPGRADE:
                roll(self, fault, event)
            elif fault.kind == "skew":
                self._write_skew(fault.value)
                event.detail = f"{int(fault.value):+d}s"
            else:
                self._replica_fault(fault, event)
        except Exception as exc:  # a harness failure is reported, not hidden
            self.violation(f"harness: fault {fault} raised {exc!r}")
        event.end = self.now()
        with self._lock:
            self.events.append(event)

    def _pg_fault(self, fault: Fault, event: Event) -> None:
        assert self.pg is not None
        timed = fault.kind == "long_outage" and self._await_tail()
        with self.pg_lock:
            event.at = self.now()  # the outage's window (timeline.py) begins here
            self.pg_down = True
            try:
                if fault.kind == "pg_restart":
                    self.pg.restart("fast")
                else:
                    self.pg.stop("fast")
                    time.sleep(fault.duration)
                    self.pg.start()
            finally:
                self.pg_down = False
                self.pg_fault_ended = time.monotonic()
        event.detail = f"{fault.duration:.1f}s down" if fault.kind != "pg_restart" else ""
        event.detail += ", as a handler began its tail" if timed else ""

    def _failover(self, fault: Fault, event: Event) -> None:
        """The leader SIGKILLed (Patroni, postmaster, children) or switched over, while runs are
        in flight; the fault lasts until the cluster is whole again (a killed node restarted on
        its data dir, streaming as the synchronous standby) and a commit went through."""
        cluster = self.ha
        assert cluster is not None
        with self.pg_lock:
            cluster.wait_healthy(120)  # the previous failover's rejoin may still be streaming
            event.at = self.now()  # the outage's window (timeline.py) begins here
            began = time.monotonic()
            self.pg_down = True
            try:
                old = cluster.leader()
                if fault.value:
                    old = cluster.kill_leader()
                    new = cluster.standby()
                    cluster.wait_leader(new, timeout=90)
                    promoted = time.monotonic() - began
                    self._move_pooler(new)
                    cluster.rejoin(old)
                else:
                    new = cluster.switchover(timeout=90)
                    promoted = time.monotonic() - began
                    self._move_pooler(new)
                cluster.wait_healthy(120)
                deadline = time.monotonic() + 60
                while not self._commit_ok() and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                self.pg_down = False
                self.pg_fault_ended = time.monotonic()
        how = "SIGKILL" if fault.value else "switchover"
        event.detail = (
            f"{how} of {old}: {new} leads after {promoted:.1f}s, commits again after "
            f"{time.monotonic() - began:.1f}s"
        )

    def _move_pooler(self, leader: str) -> None:
        """Point the pooler at the new leader, as a Patroni on_role_change callback would."""
        if self.pooler is not None and self.ha is not None:
            with self.pooler_lock:
                self.pooler.point_at(self.ha.members[leader].dsn)

    def _commit_ok(self) -> bool:
        """A transaction with an xid commits: on a strict synchronous primary, only once a
        synchronous standby confirmed it."""
        try:
            self.query("SELECT txid_current()")
            return True
        except psycopg.Error:
            return False

    def _partition(self, fault: Fault, event: Event) -> None:
        """Every connection of one replica black-holed for longer than every lease: what it sent
        waits in the kernel, nothing errors, no call returns; then everything flows again."""
        with self.lanes.holding(fault.target) as slot:
            event.target = slot.agent_id
            try:
                for proxy in slot.proxies:
                    proxy.blackhole()
                time.sleep(fault.duration)
            finally:
                for proxy in slot.proxies:
                    proxy.restore()
        event.detail = f"cut off {fault.duration:.1f}s"

    def _pooler_fault(self, fault: Fault, event: Event) -> None:
        """The pooler killed and started again, or paused and resumed, after the fault's
        duration. A PAUSE answers once the transactions in flight ended (a replica stopped in
        one holds it): it is resumed at the planned end whether or not it answered."""
        pooler = self.pooler
        assert pooler is not None
        with self.pooler_lock:  # a failover moves it meanwhile
            if not fault.value:
                pooler.kill()
                time.sleep(fault.duration)
                pooler.start()
                event.detail = f"killed, started again after {fault.duration:.1f}s"
                return
            pausing = threading.Thread(target=pooler.pause, daemon=True)
            pausing.start()
            time.sleep(fault.duration)
            pooler.resume()
            pausing.join(10)
            event.detail = f"paused {fault.duration:.1f}s"

    def _await_tail(self) -> bool:
        """Ask for the moment a handler has made its last write and works on without the
        database (bench/chaos/app.py takes the file outage-wanted then): an outage that begins
        there lets the handler finish while Postgres is away. False if none came in time."""
        wanted, now = self.trace_dir / "outage-wanted", self.trace_dir / "outage-now"
        wanted.touch()
        deadline = time.monotonic() + TAIL_WAIT
        while time.monotonic() < deadline and not now.exists():
            time.sleep(0.02)
        try:
            wanted.unlink()
            return False
        except FileNotFoundError:  # taken
            now.unlink()
            return True

    def _manual_fault(self, fault: Fault, event: Event) -> None:
        """A manual run of a Forbid job (the store, as the operator's trigger annotation does), or
        a backfill of two or three of its occurrences (the CLI, as a person does)."""
        job = next(j for j in self.jobs if j["name"] == fault.target)
        try:
            if fault.kind == "trigger":
                store = Store(self.dsn)
                try:
                    queued = store.listings.request_runs(job["name"], [store.db_now()], "manual")
                finally:
                    store.close()
                event.detail = f"queued {len(queued)}"
                return
            (db_now,) = self.query("SELECT now()")[0]
        except (psycopg.Error, ClaimschedError) as exc:  # Postgres may be away: so be it
            event.detail = f"refused: {type(exc).__name__}: {str(exc)[:120]}"
            return
        period = timedelta(seconds=job["period"])
        if fault.value < 0:  # the last occurrences, most of them already ran or were skipped
            end = db_now - timedelta(seconds=1)
        else:  # occurrences from before the schedule began
            end = self.active_since[job["name"]] - fault.value * period
        start = end - 2 * period - timedelta(milliseconds=500)
        command = [sys.executable, "-m", "claimsched.cli", "backfill", "--json", job["name"],
                   start.isoformat(), end.isoformat()]
        env = {**os.environ, "CLAIMSCHED_DSN": self.dsn, "PYTHONPATH": python_path(REPO)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        if "Traceback" in done.stderr:
            self.violation(f"the backfill command crashed:\n{done.stderr[-1500:]}")
        event.detail = (
            done.stdout.strip() if done.returncode == 0
            else f"refused: {done.stderr.strip()[-200:]}"
        )

    def _freeze_fault(self, fault: Fault, event: Event) -> None:
        """Ask the next handler of the job that enters its once() block to freeze its replica
        there (bench/chaos/app.py), keep it frozen for the fault's duration, then resume it."""
        job = next(j for j in self.jobs if j["name"] == fault.target)
        flag = self.trace_dir / f"freeze-{job['name']}"
        with self.freeze_lock:
            flag.touch()
            deadline = time.monotonic() + 3 * job["period"] + 5
            taken = None
            while taken is None:
                taken = next(iter(self.trace_dir.glob(f"frozen-{job['name']}-*")), None)
                if taken is None and time.monotonic() > deadline:
                    try:
                        flag.unlink()
                        event.detail = "no run of it reached its once() block"
                        return
                    except FileNotFoundError:  # taken just now
                        deadline = time.monotonic() + 5
                time.sleep(0.02)
            pid = int(taken.name.rsplit("-", 1)[1])
            frozen = [
                (s.agent_id, s.replica)
                for s in self.slots.values()
                if s.replica is not None and s.replica.process.pid == pid
            ]
            time.sleep(fault.duration)
            for _, replica in frozen:  # unless a SIGKILL came first
                if replica.alive:
                    replica.signal(signal.SIGCONT)
            taken.unlink()
            event.target = frozen[0][0] if frozen else f"pid {pid}"
            event.detail = f"{job['name']} frozen inside once() for {fault.duration:.1f}s"

    def _replica_fault(self, fault: Fault, event: Event) -> None:
        with self.lanes.holding(fault.target) as slot:
            replica = slot.replica
            assert replica is not None
            event.target = slot.agent_id
            if fault.kind == "sigstop":
                replica.signal(signal.SIGSTOP)
                time.sleep(fault.duration)
                replica.signal(signal.SIGCONT)
                event.detail = f"paused {fault.duration:.1f}s"
                return
            graceful = fault.kind == "sigterm" or bool(fault.kind == "new_id" and fault.value)
            self.bring_down(slot, graceful, event)
            time.sleep(fault.duration)
            if fault.kind == "new_id":
                suffix = chr(ord("a") + len(slot.ids))
                slot.agent_id = f"{slot.name}{suffix}"
                slot.ids.append(slot.agent_id)
                slot.incarnation = 0
                event.detail += f", back as {slot.agent_id}"
            self.launch(slot)

    def bring_down(self, slot: Slot, graceful: bool, event: Event) -> None:
        replica = slot.replica
        assert replica is not None
        if graceful:
            # SIGTERM is what a rolling update sends a started app; before the agent installed
            # its handler Python would just die, so wait (bounded) for the agent to be up.
            deadline = time.monotonic() + 15
            while replica.alive and not self.started(slot) and time.monotonic() < deadline:
                time.sleep(0.05)
        if not replica.alive:
            event.detail = "already down"
            self._classify_exit(slot, replica)
            return
        replica.signal(signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            code = replica.process.wait(GRACE + 15)
        except Exception:
            stacks = _stacks(replica)
            replica.signal(signal.SIGKILL)
            replica.process.wait(10)
            self.violation(
                f"{slot.agent_id} did not stop within {GRACE + 15}s of SIGTERM; its threads:\n"
                f"{stacks}"
            )
            return
        event.detail = f"{'SIGTERM' if graceful else 'SIGKILL'}, exit {code}"
        if graceful and code != 0:
            self.violation(
                f"{slot.agent_id} exited {code} on SIGTERM (expected 0):\n"
                f"{replica.output()[-1500:]}"
            )

    def _classify_exit(self, slot: Slot, replica: Replica) -> None:
        """A replica that exited on its own: refusing to start without a database is expected
        (the kubelet restarts it); anything else is a crash."""
        code = replica.process.poll()
        text = replica.output()
        if "libfaketime: In parse_ft_string()" in text:
            # the clock-skew tool itself aborted the process (exit(1), like a SIGKILL); not
            # something claimsched did, so it counts as one more crash fault
            self.notes["libfaketime_aborts"] += 1
            return
        settle = SETTLE_AFTER_DB_FAULT[self.cfg.ha]
        recent_pg = self.pg_down or time.monotonic() - self.pg_fault_ended < settle
        if "agent started" not in text and "claimsched: error:" in text and recent_pg:
            self.notes["startup_refused_while_db_down"] += 1
            return
        self.violation(f"{slot.agent_id} exited {code} unexpectedly:\n{text[-2000:]}")

    def _kubelet(self) -> None:
        """Restart replicas that exited on their own (restartPolicy: Always, 1 s back-off)."""
        while not self.stop.wait(0.2):
            for slot in self.slots.values():
                if slot.held or slot.replica is None or slot.replica.alive:
                    continue
                if not slot.lock.acquire(blocking=False):
                    continue
                try:
                    if slot.held or slot.replica.alive:
                        continue
                    self._classify_exit(slot, slot.replica)
                    with self._lock:
                        self.events.append(
                            Event(
                                self.now(),
                                "exited",
                                slot.agent_id,
                                f"exit {slot.replica.process.poll()}",
                            )
                        )
                    time.sleep(1.0)
                    self.launch(slot)
                finally:
                    slot.lock.release()

    # -- maintenance, concurrently ---------------------------------------------------------------

    def _finished_rows(self) -> dict[int, tuple[Any, ...]]:
        rows = self.query(
            "SELECT id, job_name, fire_time, kind, status, claimed_by, attempt, started_at, "  # noqa: S608
            f"finished_at, error, orphan_count FROM {self.scope['runs']} "
            "WHERE status IN ('done', 'skipped') OR (status = 'failed' AND retry_at IS NULL)"
        )
        return {row[0]: row for row in rows}

    def _maintain_once(self, why: str) -> None:
        dsn = psycopg.conninfo.make_conninfo(
            self.dsn, options="-c claimsched_test.actor=maintenance"
        )
        try:
            before = self._finished_rows()
            summary = Store(dsn).admin.maintain()
            after = self._finished_rows()
        except Exception as exc:
            self.maintenance["failed"] += 1
            self.maintenance[f"failed: {type(exc).__name__}"] += 1
            return
        self.maintenance["runs"] += 1
        self.maintenance["partitions_created"] += len(summary.partitions_created)
        for rid, row in before.items():
            if after.get(rid) != row:
                self.violation(
                    f"history changed by maintenance ({why}): {row} became {after.get(rid)}"
                )
        with self._lock:
            for rid, row in after.items():
                self.finished_seen.setdefault(rid, row)

    def _maintain(self) -> None:
        for wait in self.maintenance_waits:
            if self.stop.wait(wait):
                return
            if self.cfg.lapse_partitions:
                try:
                    self._lapse()
                except psycopg.Error:
                    self.maintenance["lapse_failed"] += 1
                if self.stop.wait(wait / 2):
                    return
            if self.migrated.is_set():  # this release's maintenance, on its own schema
                self._maintain_once("during the storm")

    # -- the end: heal, catch up, quiesce, stop --------------------------------------------------

    def _heal(self) -> None:
        with self.pg_lock:
            if self.ha is not None:
                self.ha.wait_healthy(120)
            elif not self.query_ok():
                assert self.pg is not None
                self.pg.start()
        if self.pooler is not None:
            with self.pooler_lock:
                if self.pooler.process is None or self.pooler.process.poll() is not None:
                    self.pooler.start()
                self.pooler.point_at(self._primary())
        for slot in self.slots.values():
            with slot.lock:
                if slot.replica is not None and slot.replica.alive:
                    slot.replica.signal(signal.SIGCONT)
                elif slot.replica is not None:
                    self._classify_exit(slot, slot.replica)
                    self.launch(slot)
        deadline = time.monotonic() + 60
        while not all(self.started(s) for s in self.slots.values()):
            if time.monotonic() > deadline:
                self.violation("replicas did not all start again after the storm")
                break
            time.sleep(0.1)

    def query_ok(self) -> bool:
        try:
            self.query("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def _catch_up(self) -> dict[str, datetime]:
        """Wait until every expected occurrence up to each job's latest due one has a row; those
        latest ones are the cutoffs. A Forbid job may have recorded its latest occurrence as
        skipped (busy) while older ones of its backlog are still deferred: they have no row yet,
        and disabling the schedules then would abandon them."""
        deadline = time.monotonic() + self.cfg.settle_timeout
        while True:
            (db_now,) = self.query("SELECT now() - interval '1.5 seconds'")[0]
            cutoff = {j["name"]: _latest(db_now, j["period"]) for j in self.jobs}
            have = set(
                self.query(
                    f"SELECT job_name, fire_time FROM {self.scope['runs']} WHERE fire_time <= %s",  # noqa: S608
                    [max(cutoff.values())],
                )
            )
            late = sorted(
                job["name"]
                for job in self.jobs
                if any(
                    (job["name"], fire) not in have
                    for fire in expected_fire_times(
                        job["period"], self.active_since[job["name"]], cutoff[job["name"]]
                    )
                )
            )
            if not late:
                return cutoff
            if time.monotonic() > deadline:
                self.violation(f"jobs never caught up within {self.cfg.settle_timeout}s: {late}")
                return cutoff
            time.sleep(0.25)

    def _quiesce(self) -> None:
        """Wait until nothing is left to do, and it stays so for longer than a claim can take
        (a claim blocked behind other claims, e.g. by a deadlock, lands after it started)."""
        deadline = time.monotonic() + self.cfg.settle_timeout
        calm_since: float | None = None
        while time.monotonic() < deadline:
            (left,) = self.query(
                "SELECT (SELECT count(*) FROM claimsched.job_runs WHERE status IN "
                "('running', 'orphaned', 'pending') "
                "    OR (status = 'failed' AND retry_at IS NOT NULL))"
                " + (SELECT count(*) FROM pg_stat_activity WHERE state <> 'idle' "
                "    AND pid <> pg_backend_pid() AND query ILIKE '%%job_runs%%')"
            )[0]
            if left:
                calm_since = None
            elif calm_since is None:
                calm_since = time.monotonic()
            elif time.monotonic() - calm_since > 3.0:
                return
            time.sleep(0.25)

    def _shutdown(self) -> None:
        for slot in self.slots.values():
            replica = slot.replica
            if replica is None or not replica.alive:
                continue
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        for slot in self.slots.values():
            replica = slot.replica
            if replica is None:
                continue
            try:
                code = replica.process.wait(GRACE + 15)
            except Exception:
                self.violation(
                    f"{slot.agent_id} did not stop on SIGTERM at the end; its threads:\n"
                    f"{_stacks(replica)}"
                )
                continue
            if code != 0:
                self.violation(
                    f"{slot.agent_id} exited {code} at the end:\n{replica.output()[-1500:]}"
                )

    def _time_checks(
        self, runs: list[tuple[Any, ...]], starts: list[tuple[Any, ...]]
    ) -> TimeChecks:
        audit = self.query(
            "SELECT seq, op, at, pg_xact_commit_timestamp(xmin), old, new "
            "FROM public.run_audit ORDER BY seq"
        )
        receipts = self.query(
            "SELECT entity, job_name, fire_time, attempt, pg_xact_commit_timestamp(xmin) "  # noqa: S608
            f"FROM {self.scope['effects']}"
        )
        external = self.query(
            "SELECT job, fire_time, entity, idempotency_key, agent, attempt "
            "FROM public.external_calls"
        )
        outages = [
            (e.kind, self._wall(e.at), self._wall(e.end if e.end is not None else e.at))
            for e in self.events
            if e.kind in DB_FAULTS
        ]
        trace = Trace.read(self.trace_dir, self.mono_to_wall)
        checks = TimeChecks(self.jobs, Timeline(audit), trace)
        checks.run(runs, starts, receipts, external, outages)
        return checks

    def _wall(self, at: float) -> datetime:
        return datetime.fromtimestamp(self.t0 + at + self.mono_to_wall, UTC)

    def _dump(self) -> None:
        """Keep what the database held, next to the logs, to diagnose a violation."""
        tables = {
            "job_runs": "SELECT * FROM claimsched.job_runs ORDER BY job_name, fire_time",
            "job_effects": "SELECT * FROM claimsched.job_effects ORDER BY job_name, fire_time",
            "run_audit": "SELECT * FROM public.run_audit ORDER BY seq",
            "ledger": "SELECT * FROM public.ledger ORDER BY job, fire_time",
            "starts": "SELECT * FROM public.starts ORDER BY at",
            "external_calls": "SELECT * FROM public.external_calls ORDER BY at",
            "agents": "SELECT * FROM claimsched.agents",
        }
        for name, statement in tables.items():
            rows = _jsonable(self.query(statement))
            (self.folder / f"{name}.json").write_text(json.dumps(rows, default=str))

    # -- the invariants --------------------------------------------------------------------------

    def _check(self, cutoff: dict[str, datetime]) -> dict[str, Any]:
        schedules = {
            row[0]: row
            for row in self.query(
                "SELECT job_name, max_attempts, retry_on_failure FROM claimsched.job_schedule"
            )
        }
        runs = self.query(
            "SELECT id, job_name, fire_time, status, attempt, claimed_by, lease_until, "  # noqa: S608
            "finished_at, error, retry_at, orphan_count, lease_until < now() "
            f"FROM {self.scope['runs']}"
        )
        receipts = self.query(
            f"SELECT entity, job_name, fire_time, run_id, attempt FROM {self.scope['effects']}"  # noqa: S608
        )
        ledger = self.query("SELECT job, fire_time, entity, agent, attempt FROM public.ledger")
        starts = self.query("SELECT job, fire_time, agent, attempt, at FROM public.starts")
        audit = self.query("SELECT seq, op, tx, actor, old, new FROM public.run_audit ORDER BY seq")
        attempts = self.query(
            "SELECT job_name, fire_time, attempt, run_id, claimed_by, outcome, error "  # noqa: S608
            f"FROM {self.scope['attempts']}"
        )
        checker = Checker(self.jobs, self.active_since, cutoff, schedules, self.recovery.log,
                          self.history_from)
        found = checker.check(runs, receipts, ledger, starts, audit, attempts)
        for outcome, n in self.query(
            f"SELECT outcome, count(*) FROM {self.scope['attempts']} GROUP BY outcome"  # noqa: S608
        ):
            checker.stats[f"superseded_{outcome}"] = n
        timed = self._time_checks(runs, starts)
        found += timed.found
        final = self._finished_rows()
        for rid, row in self.finished_seen.items():
            if final.get(rid) != row:
                found.append(f"finished run {row} is {final.get(rid)} at the end")
        self.violations.extend(found)
        if self.violations or os.environ.get("CHAOS_DUMP"):
            self._dump()
        logs = "\n".join(p.read_text(errors="replace") for p in self.folder.glob("*.log"))
        executed = Counter(e.kind for e in self.events if e.kind in ALL_KINDS and e.happened)
        missed = Counter(e.kind for e in self.events if not e.happened)
        (deadlocks,) = self.query(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )[0]
        (expired_at_grant,) = self.query(
            "SELECT count(*) FROM public.run_audit WHERE new->>'status' = 'running' "
            "AND (op = 'INSERT' OR old->>'attempt' <> new->>'attempt') "
            "AND (new->>'lease_until')::timestamptz <= at AND actor IS NULL"
        )[0]
        first_start: dict[tuple[str, datetime], datetime] = {}
        # manual and backfilled runs: their fire time is not when they were due
        asked = set(
            self.query(
                f"SELECT job_name, fire_time FROM {self.scope['runs']} WHERE kind <> 'scheduled'"  # noqa: S608
            )
        )
        for job, fire, _agent, _attempt, at in starts:
            if (job, fire) not in asked:
                first_start[(job, fire)] = min(at, first_start.get((job, fire), at))
        latencies = sorted(
            (round(fire.timestamp() - self.wall0, 3), round((at - fire).total_seconds(), 3))
            for (_job, fire), at in first_start.items()
        )
        return {
            "seed": self.cfg.seed,
            "replicas": self.cfg.replicas,
            "jobs": self.cfg.jobs,
            "fault_seconds": self.cfg.duration,
            "lapse_partitions": self.cfg.lapse_partitions,
            "ha": self.cfg.ha,
            "kinds": list(self.cfg.kinds),
            "skewed_replica": self.skewed,
            "initial_skew_seconds": self.initial_skew,
            "faults_planned": [asdict(f) for f in self.faults],
            "faults_executed": [asdict(e) for e in sorted(self.events, key=lambda e: e.at)],
            "database": "patroni: 2 nodes, synchronous_mode_strict" if self.cfg.ha
            else "one server",
            "fault_counts": {k: executed.get(k, 0) for k in ALL_KINDS if k in self.cfg.kinds},
            # faults that found nothing to act on in time (no reclaimed or backfilled run)
            "faults_missed": dict(missed),
            "max_concurrent_faults": _max_overlap(self.events),
            "occurrences_checked": checker.stats["expected"],
            **{k: v for k, v in checker.stats.items() if k != "expected"},
            **dict(sorted(timed.stats.items())),
            "completions_refused": logs.count("completion refused"),
            "leases_lost": logs.count("lease lost:"),
            "maintenance": dict(self.maintenance),
            # findings, not invariants: claims that deadlocked on each other (Postgres counts
            # them; each costs a second), and leases that had already expired when granted
            "deadlocks": deadlocks,
            "leases_granted_already_expired": expired_at_grant,
            "notes": dict(self.notes),
            "violations": self.violations,
            "violation_kinds": violation_kinds(self.violations),
            "logs": str(self.folder),
            "storm_began_at": self.wall0,  # epoch seconds: second 0 of every "at"
            # seconds since the storm began: (fire time, fire-to-first-start latency)
            "fire_to_start": latencies,
        }


VIOLATION_KINDS = {
    # recovery_checks.py (their lines name attempts: before the patterns below)
    "while the whole fleet was down (": "harness failure",
    "while the whole fleet was down and": "Latest did not run the newest missed occurrence",
    "without a job_attempts row": "superseded attempt not kept",
    "was kept as": "superseded attempt kept wrong",
    "kept, but no later attempt": "superseded attempt of a run not superseded",
    "never finished by a later attempt": "fenced-out attempt never finished",
    "was superseded as": "paused or killed attempt superseded wrong",
    "neither superseded nor finished": "paused or killed attempt left behind",
    "do not allow": "skipped against its policies",
    "in progress at once": "Forbid runs in progress at once",
    "at work at once": "Forbid handlers at work at once",
    "whose handler failed": "done though its handler failed",
    "finished during an outage": "late completion lost",
    "was granted (": "receipt committed after a later attempt began",
    "idempotency keys": "idempotency key not stable",
    "backfill command crashed": "CLI traceback",
    "happened twice": "duplicate effect",
    "claimed twice": "occurrence claimed twice",
    "completed as done": "two completions",
    "ran twice": "one attempt ran twice",
    "without being granted": "ran without a lease",
    "never granted": "effect without a lease",
    "has no receipt": "effect without receipt",
    "without the app's write": "receipt without effect",
    "done without its": "done without its effects",
    "never ran and was never recorded": "missed occurrence",
    "never caught up": "did not catch up",
    "still running past its lease": "running past its lease",
    "left ": "unfinished at the end",
    "retry never ran": "retry never ran",
    "failed for good after": "gave up before max attempts",
    "without a reason": "skipped without a reason",
    "without an error": "failed without an error",
    "maintenance moved": "history changed by maintenance",
    "history changed": "history changed by maintenance",
    "deleted and never put back": "history lost",
    "finished run": "history changed",
    "attempt ": "fencing token jumped",
    "owner without": "owner changed without a new token",
    "did not stop": "shutdown hang",
    "exited": "replica crashed",
    "harness": "harness failure",
}


def violation_kinds(violations: list[str]) -> dict[str, int]:
    kinds: Counter[str] = Counter()
    for text in violations:
        head = text.split("\n", 1)[0]
        kinds[next((k for p, k in VIOLATION_KINDS.items() if p in head), "other")] += 1
    return dict(kinds)


def _stacks(replica: Replica) -> str:
    """Every thread's stack of a live replica (bench/chaos/app.py dumps them on SIGUSR1)."""
    before = len(replica.output())
    replica.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and "most recent call first" not in replica.output()[before:]:
        time.sleep(0.1)
    time.sleep(0.3)
    return replica.output()[before:][-6000:]


def _jsonable(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [[v.isoformat() if isinstance(v, datetime) else v for v in row] for row in rows]


def _latest(moment: datetime, period: int) -> datetime:
    seconds = math.floor(moment.timestamp() / period) * period
    return datetime.fromtimestamp(seconds, UTC)


def expected_fire_times(period: int, active_since: datetime, cutoff: datetime) -> list[datetime]:
    """The occurrences of an `@every <period>s` job after `active_since`, up to `cutoff`."""
    first = math.floor(active_since.timestamp() / period) * period + period
    last = int(cutoff.timestamp())
    return [datetime.fromtimestamp(s, UTC) for s in range(int(first), last + 1, period)]


def _max_overlap(events: list[Event]) -> int:
    edges = []
    for e in events:
        if e.kind in ALL_KINDS and e.kind != "skew" and e.end is not None and e.happened:
            edges += [(e.at, 1), (e.end, -1)]
    level = peak = 0
    for _, step in sorted(edges, key=lambda x: (x[0], x[1])):
        level += step
        peak = max(peak, level)
    return peak


class Checker:
    """The invariants, over what the database holds at the end. Each finding is one line."""

    def __init__(
        self,
        jobs: list[dict[str, Any]],
        active_since: dict[str, datetime],
        cutoff: dict[str, datetime],
        schedules: dict[str, tuple[Any, ...]],
        recovery: RecoveryLog | None = None,
        history_from: int = 0,
    ) -> None:
        self.jobs = {j["name"]: j for j in jobs}
        # the audit trail's position after which every superseded attempt has a history (a storm
        # that began on the previous release: upgrade.py)
        self.history_from = history_from
        self.active_since = active_since
        self.cutoff = cutoff
        self.schedules = schedules
        self.recovery = recovery or RecoveryLog()
        self.superseded: list[Superseded] = []  # attempts reclaims took over (audit trail)
        self.stats: Counter[str] = Counter()
        self.found: list[str] = []

    def fail(self, text: str) -> None:
        if len(self.found) < 200:
            self.found.append(text)
        self.stats["violations_total"] += 1

    def check(
        self,
        runs: list[tuple[Any, ...]],
        receipts: list[tuple[Any, ...]],
        ledger: list[tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
        audit: list[tuple[Any, ...]],
        attempts: Sequence[tuple[Any, ...]] = (),
    ) -> list[str]:
        by_key = {(r[1], r[2]): r for r in runs}
        grants = self._audit(audit)
        self._final_states(runs)
        self._expected(by_key)
        self._effects(by_key, receipts, ledger, grants)
        self._starts(by_key, starts, grants)
        self._recovery(runs, attempts, starts)
        self.stats["rows"] = len(runs)
        self.stats["receipts"] = len(receipts)
        self.stats["ledger_rows"] = len(ledger)
        self.stats["handler_starts"] = len(starts)
        for status, n in Counter(r[3] for r in runs).items():
            self.stats[f"status_{status}"] = n
        return self.found

    # no occurrence claimed twice, no finished run changed, maintenance moves rows unchanged,
    # fencing tokens only grow by one on a reclaim, at most one completion per occurrence
    def _audit(self, audit: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
        state: dict[int, dict[str, Any]] = {}
        deleted: dict[int, tuple[int, dict[str, Any]]] = {}
        inserted: Counter[tuple[str, str]] = Counter()
        completions: Counter[tuple[str, str]] = Counter()
        grants: set[tuple[Any, ...]] = set()
        for seq, op, tx, actor, old, new in audit:
            if op == "INSERT":
                rid = new["id"]
                if rid in deleted:
                    dtx, content = deleted.pop(rid)
                    self.stats["rows_moved_by_maintenance"] += 1
                    if dtx != tx:
                        self.fail(f"run {rid} deleted by tx {dtx}, put back by tx {tx}")
                    if content != new:
                        self.fail(
                            f"maintenance moved run {rid} and changed it: {_diff(content, new)}"
                        )
                elif rid in state:
                    if state[rid] != new:
                        self.fail(
                            f"run {rid} copied by {actor} and changed: {_diff(state[rid], new)}"
                        )
                else:
                    key = _key(new)
                    inserted[key] += 1
                    if inserted[key] > 1:
                        self.fail(f"occurrence {key} claimed twice (second row id {rid})")
                    if new["status"] == "running":
                        grants.add((*key, new["attempt"], new["claimed_by"]))
                state[rid] = new
            elif op == "DELETE":
                rid = old["id"]
                deleted[rid] = (tx, old)
                state.pop(rid, None)
            else:
                self._transition(old, new, completions, grants, seq > self.history_from)
                state[new["id"]] = new
        for rid, (_tx, content) in deleted.items():
            self.fail(f"run {rid} was deleted and never put back: {_short(content)}")
        for key, n in completions.items():
            if n > 1:
                self.fail(f"occurrence {key} completed as done {n} times")
        self.stats["audit_events"] = len(audit)
        return grants

    def _transition(
        self,
        old: dict[str, Any],
        new: dict[str, Any],
        completions: Counter[tuple[str, str]],
        grants: set[tuple[Any, ...]],
        kept: bool = True,  # the attempt a reclaim supersedes here must have a history
    ) -> None:
        key = _key(new)
        if _terminal(old):
            if old != new:
                self.fail(f"finished run {key} changed: {_diff(old, new)}")
            return
        if new["attempt"] != old["attempt"]:
            if not (
                new["attempt"] == old["attempt"] + 1
                and new["status"] == "running"
                and old["status"] in ("orphaned", "pending", "failed")
            ):
                self.fail(
                    f"run {key} attempt {old['attempt']} -> {new['attempt']} "
                    f"({old['status']} -> {new['status']})"
                )
            grants.add((*key, new["attempt"], new["claimed_by"]))
            self.stats["reclaims" if old["status"] == "orphaned" else "retries_or_requests"] += 1
            if old["status"] in ("orphaned", "failed") and kept:
                self.superseded.append(
                    (*key, old["attempt"], old["claimed_by"], old["status"], old["error"])
                )
        elif new["claimed_by"] != old["claimed_by"]:
            self.fail(f"run {key} changed owner without a new fencing token: {_diff(old, new)}")
        if new["status"] == "orphaned" and old["status"] != "orphaned":
            self.stats["orphaned"] += 1
        if new["status"] == "done":
            # from orphaned: a late completion (the owner paused or cut off past its lease,
            # nobody reclaimed the run meanwhile: same attempt and owner, checked above)
            if old["status"] not in ("running", "orphaned"):
                self.fail(f"run {key} done from {old['status']}")
            elif old["status"] == "orphaned":
                self.stats["done_from_orphaned"] += 1
            completions[key] += 1

    # every orphan was reclaimed or failed for good; nothing runs past its lease at the end;
    # skipped and failed runs say why; failures stop only when attempts ran out
    def _final_states(self, runs: list[tuple[Any, ...]]) -> None:
        for (
            _id,
            job,
            fire,
            status,
            attempt,
            owner,
            _lease,
            _fin,
            error,
            retry_at,
            _orphans,
            expired,
        ) in runs:
            where = f"{job} @ {fire:%H:%M:%S} (attempt {attempt}, {owner})"
            if status == "running" and expired:
                self.fail(f"{where} still running past its lease at the end")
            elif status in UNFINISHED:
                self.fail(f"{where} left {status} at the end")
            elif status == "failed" and retry_at is not None:
                self.fail(f"{where} failed and its retry never ran")
            elif status == "skipped" and not error:
                self.fail(f"{where} skipped without a reason")
            elif status == "failed":
                max_attempts, retry = self.schedules[job][1:3]
                if not error:
                    self.fail(f"{where} failed without an error")
                elif fenced_out(error) and attempt < max_attempts:
                    self.fail(f"{where} failed only because it was fenced out: {error}")
                elif retry and attempt < max_attempts:
                    self.fail(
                        f"{where} failed for good after {attempt} of {max_attempts} "
                        f"attempts: {error}"
                    )
                else:
                    self.stats["failed_after_max_attempts"] += 1

    # superseded attempts kept and finished; what the recovery faults left (recovery_checks.py)
    def _recovery(
        self,
        runs: list[tuple[Any, ...]],
        attempts: Sequence[tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
    ) -> None:
        max_attempts = {job: row[1] for job, row in self.schedules.items()}
        checks = RecoveryChecks(self.jobs, max_attempts, runs)
        for text in checks.run(list(attempts), self.superseded, self.recovery, starts):
            self.fail(text)
        self.stats.update(checks.stats)

    # every expected occurrence inside the catch-up window ran or is accounted for
    def _expected(self, by_key: dict[tuple[str, datetime], tuple[Any, ...]]) -> None:
        for name, job in self.jobs.items():
            for fire in expected_fire_times(
                job["period"], self.active_since[name], self.cutoff[name]
            ):
                self.stats["expected"] += 1
                row = by_key.get((name, fire))
                if row is None:
                    self.fail(f"{name} @ {fire:%H:%M:%S} never ran and was never recorded")
                    continue
                self.stats[f"expected_{row[3]}"] += 1

    # no occurrence has two effects for one key; receipts and the app's writes agree;
    # a done run has every effect of its handler; effects came from granted attempts
    def _effects(
        self,
        by_key: dict[tuple[str, datetime], tuple[Any, ...]],
        receipts: list[tuple[Any, ...]],
        ledger: list[tuple[Any, ...]],
        grants: set[tuple[Any, ...]],
    ) -> None:
        receipt_at = {(r[1], r[2], r[0]): r for r in receipts}
        written: Counter[tuple[Any, ...]] = Counter()
        for job, fire, entity, agent, attempt in ledger:
            key = (job, fire, entity)
            written[key] += 1
            if written[key] == 2:
                self.fail(f"effect {entity!r} of {job} @ {fire:%H:%M:%S} happened twice")
            entity_key = entity.removeprefix("once:")
            receipt = receipt_at.get((job, fire, entity_key))
            if receipt is None:
                self.fail(f"effect {entity!r} of {job} @ {fire:%H:%M:%S} has no receipt")
            elif receipt[4] != attempt:
                self.fail(
                    f"effect {entity!r} of {job} @ {fire:%H:%M:%S} by attempt {attempt}, "
                    f"receipt by attempt {receipt[4]}"
                )
            if (job, fire, attempt, agent) not in grants:
                self.fail(
                    f"effect {entity!r} of {job} @ {fire:%H:%M:%S} by {agent} attempt "
                    f"{attempt}, which was never granted that lease"
                )
        plain = {k for k in written if not k[2].startswith("once:")}
        for job, fire, entity in receipt_at:
            if by_key.get((job, fire)) is None:
                self.fail(f"receipt {entity!r} for {job} @ {fire:%H:%M:%S} without a run")
            once = self.jobs[job].get("once") == entity
            if not once and (job, fire, entity) not in plain:
                self.fail(
                    f"receipt {entity!r} of {job} @ {fire:%H:%M:%S} without the app's "
                    "write of the same transaction"
                )
        for (job, fire), row in by_key.items():
            if row[3] != "done":
                continue
            spec = self.jobs[job]
            for key in ("before", "once", "after"):
                if spec.get(key) and (job, fire, spec[key]) not in receipt_at:
                    self.fail(f"{job} @ {fire:%H:%M:%S} done without its {spec[key]!r} effect")

    # one handler per attempt, and only for attempts the database granted
    def _starts(
        self,
        by_key: dict[tuple[str, datetime], tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
        grants: set[tuple[Any, ...]],
    ) -> None:
        seen: Counter[tuple[Any, ...]] = Counter()
        for job, fire, agent, attempt, _at in starts:
            seen[(job, fire, attempt)] += 1
            if seen[(job, fire, attempt)] == 2:
                self.fail(f"{job} @ {fire:%H:%M:%S} attempt {attempt} ran twice")
            if (job, fire, attempt, agent) not in grants:
                self.fail(
                    f"{job} @ {fire:%H:%M:%S}: {agent} ran attempt {attempt} "
                    "without being granted it"
                )
            row = by_key.get((job, fire))
            if row is not None and attempt > row[4]:
                self.fail(f"{job} @ {fire:%H:%M:%S}: attempt {attempt} ran, row says {row[4]}")
        reruns = Counter((job, fire) for job, fire, *_ in starts)
        self.stats["occurrences_run_more_than_once"] = sum(1 for n in reruns.values() if n > 1)


def _key(row: dict[str, Any]) -> tuple[str, datetime]:
    return row["job_name"], datetime.fromisoformat(row["fire_time"])


def _terminal(row: dict[str, Any]) -> bool:
    return row["status"] in TERMINAL or (row["status"] == "failed" and row["retry_at"] is None)


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(set(a) | set(b))
    return ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k))


def _short(row: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={row.get(k)}"
        for k in ("id", "job_name", "fire_time", "status", "attempt", "claimed_by")
    )


# -- reporting and replay --------------------------------------------------------------------------


def summary(report: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in report["fault_counts"].items())
    lines = [
        f"seed {report['seed']}: R={report['replicas']} J={report['jobs']} "
        f"faults for {report['fault_seconds']}s ({counts}; up to "
        f"{report['max_concurrent_faults']} at once), {report['occurrences_checked']} "
        f"occurrences checked, {report.get('rows', 0)} rows, "
        f"{len(report['violations'])} violation(s), {report['elapsed_seconds']}s",
    ]
    superseded = {k.removeprefix("superseded_"): v for k, v in report.items()
                  if k.startswith("superseded_")}
    if superseded:
        lines.append(f"  superseded attempts by outcome: {superseded}")
    if report.get("faults_missed"):
        lines.append(f"  faults that found nothing to act on: {report['faults_missed']}")
    if report["violations"]:
        lines.append(f"  kinds: {report['violation_kinds']}")
    for violation in report["violations"][:30]:
        lines.append(f"  - {violation}")
    if report["violations"]:
        lines.append(f"  replay: {replay_command(report)}")
        lines.append(f"  logs: {report['logs']}")
    return "\n".join(lines)


def replay_command(report: dict[str, Any], program: str = "bench.chaos") -> str:
    return (
        f"python -m {program} --seed {report['seed']} --replicas {report['replicas']} "
        f"--jobs {report['jobs']} --duration {report['fault_seconds']:g}"
        + replay_options(report)
    )


def replay_options(report: dict[str, Any]) -> str:
    """The options beyond size and seed that a replay of `report` needs."""
    ha = bool(report.get("ha"))
    kinds = tuple(report.get("kinds") or default_kinds(ha))
    return (
        (" --ha" if ha else "")
        + (f" --kinds {','.join(kinds)}" if kinds != default_kinds(ha) else "")
        + (" --lapse-partitions" if report.get("lapse_partitions") else "")
    )


def default_kinds(ha: bool) -> tuple[str, ...]:
    """What a storm draws unless told: every fault its database allows (partitions are drawn
    only when asked for on a standalone server, so the seeds recorded before them replay)."""
    return HA_KINDS if ha else FAULT_KINDS


def run_seed(cfg: ChaosConfig, folder: Path | None = None, verbose: bool = False) -> dict[str, Any]:
    folder = folder or Path(tempfile.mkdtemp(prefix=f"claimsched-chaos-{cfg.seed}-"))
    folder.mkdir(parents=True, exist_ok=True)
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else None
    report = ChaosRun(cfg, folder, say).run()
    (folder / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


def lapse_partition(dsn: str) -> bool:
    """Maintenance lapsed: this month's partition is missing, its rows live in the default
    partition (as after months without `claimsched maintain`). Done atomically, under an
    exclusive lock, so that the agents never see a half-moved table. False if already lapsed."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SET LOCAL claimsched_test.actor = 'harness-lapse'")
        conn.execute("LOCK TABLE claimsched.job_runs IN ACCESS EXCLUSIVE MODE")
        month = conn.execute("SELECT date_trunc('month', now())").fetchone()[0]  # type: ignore[index]
        name = f"job_runs_p{month:%Y%m}"
        part = psycopg.sql.Identifier("claimsched", name)
        if not conn.execute("SELECT to_regclass(%s)", [f"claimsched.{name}"]).fetchone()[0]:  # type: ignore[index]
            return False
        conn.execute(
            psycopg.sql.SQL("ALTER TABLE claimsched.job_runs DETACH PARTITION {}").format(part)
        )
        conn.execute(
            psycopg.sql.SQL(
                "INSERT INTO claimsched.job_runs OVERRIDING SYSTEM VALUE SELECT * FROM {}"
            ).format(part)
        )
        conn.execute(psycopg.sql.SQL("DROP TABLE {}").format(part))
    return True


def storm_arguments(
    parser: argparse.ArgumentParser, defaults: ChaosConfig
) -> argparse.ArgumentParser:
    """The options of a storm (the replay here, the soak in bench/soak.py), with `defaults`."""
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--replicas", type=int, default=defaults.replicas)
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--duration", type=float, default=defaults.duration,
                        help="seconds of faults")
    parser.add_argument("--fault-rate", type=float, default=defaults.fault_rate,
                        help="faults per second")
    parser.add_argument("--kinds", help="fault kinds to draw (default: every kind the database "
                        f"allows; all: {','.join(ALL_KINDS)})")
    parser.add_argument("--lapse-partitions", action="store_true",
                        help="let maintenance move rows (exposes the partition-move race)")
    parser.add_argument("--ha", action="store_true",
                        help="on a Patroni cluster (2 nodes, synchronous, strict): failover "
                        "faults instead of the standalone server's restarts and outages")
    return parser


def storm_config(args: argparse.Namespace, **more: Any) -> ChaosConfig:
    """The ChaosConfig the options of storm_arguments() describe, and `more`; bad options exit
    with a one-line error."""
    if args.kinds is None:
        kinds = default_kinds(args.ha)
    else:
        kinds = tuple(k for k in args.kinds.split(",") if k)
    try:
        return ChaosConfig(
            seed=args.seed,
            replicas=args.replicas,
            jobs=args.jobs,
            duration=args.duration,
            fault_rate=args.fault_rate,
            kinds=kinds,
            lapse_partitions=args.lapse_partitions,
            ha=args.ha,
            **more,
        )
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = storm_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                             ChaosConfig(seed=0))
    parser.add_argument("--plan", action="store_true", help="print the plan only")
    args = parser.parse_args(argv)
    cfg = storm_config(args)
    if args.plan:
        run = ChaosRun(cfg, Path(tempfile.mkdtemp()))
        print(
            json.dumps(
                {"jobs": run.jobs, "skewed": run.skewed, "faults": [asdict(f) for f in run.faults]},
                indent=1,
            )
        )
        return 0
    report = run_seed(cfg, verbose=True)
    print(summary(report))
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())

