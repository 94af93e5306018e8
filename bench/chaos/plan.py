"""The seeded plan: everything a seed decides (the jobs, the skewed replica, the faults and
their lanes, the pauses between maintenance runs), as plan() returns it."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

from .config import ChaosConfig
from .faults import FLEET, GRACE, STARTUP, Fault
from .jobs import plan_jobs
from .kinds import DB_FAULTS, FAILOVER, MANUAL_FAULTS, PARTITION, POOLER, WEIGHTS
from .recovery import (
    BACKFILL_WAIT,
    FLEET_DOWN,
    KILL_BACKFILLER,
    PAUSE_RECLAIMER,
    RECLAIMED_WAIT,
    RECOVERY_FAULTS,
    plan_recovery,
)
from .upgrade import ROLLING_UPGRADE, plan_upgrade

# Planned seconds of a failover on the "postgres" lane (Patroni's ttl of 20 s, then the dead
# node's rejoin: a strict synchronous cluster takes no commit until a standby is back), and the
# healthy time after it before the next database fault.
FAILOVER_SECONDS = {0: 10.0, 1: 35.0}
FAILOVER_SLACK = 15.0
# Faults that wait for their moment reading job_runs (`WATCHING` seconds after they start): no
# database fault is on meanwhile
WATCHING = {PAUSE_RECLAIMER: RECLAIMED_WAIT, KILL_BACKFILLER: BACKFILL_WAIT}
MAX_SKEW = 300  # seconds, either way
TAIL_WAIT = 4.0  # seconds a long outage may wait for a handler's tail before it begins


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
    has one fault at a time, a frozen job one freeze at a time, and no database fault (nor the
    pooler's) is on while a WATCHING fault waits. A rolling upgrade, when asked for, comes first
    and holds every lane, the database's too: no other fault starts before it ends (upgrade.py).
    Faults on
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
            elif kind == POOLER:  # half the fleet's database fault: clear of the watches too
                clear = not overlaps(POOLER, low, high) and not any(
                    a < low + duration + 1.0 and low < b for a, b in watches
                )
                target = POOLER if clear else None
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
        if kind == POOLER:
            outages.append((at, at + duration + 1.0))
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
