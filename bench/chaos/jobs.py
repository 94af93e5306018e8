"""The storm's jobs, drawn from its seed: @every 1-3 s, Forbid or Allow, short, long, flaky or
doomed handlers, and the special jobs some fault kinds need (overrunning, freezing, retried)."""

from __future__ import annotations

import random
from typing import Any

from .recovery import KILL_BACKFILLER, PAUSE_RECLAIMER, retried_job

# The jobs the newer faults need: Forbid jobs that overrun their period (some their lease), with
# work after their last effect (a handler that finishes while Postgres is away), and jobs whose
# once() block freezes its replica on the harness's word. They replace the last jobs of a plan.
OVERRUN_FOR = {"trigger", "backfill", "long_outage", KILL_BACKFILLER}
FREEZE_FOR = {"freeze_in_once"}
RETRIED_FOR = {PAUSE_RECLAIMER}  # a job whose second attempts run long (recovery.retried_job)


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
