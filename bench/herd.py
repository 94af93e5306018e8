"""Scenario b: a thundering herd. J jobs all due at one instant T on R replicas.

The schedules (`@every P s`) are written disabled; once every replica is up they are enabled
(active from now: nothing before T runs), and T is their next instant. Every handler records
its start and then sleeps `handler_ms` (10 ms), so a replica's slots are really taken. Measured:
how long after T the last handler started, the latency distribution, and the spread of runs
over replicas (fair share J/R; no replica should take more than 1.5 times its share).
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from . import plot, sql
from .cluster import cluster
from .common import DEFAULT_SLOTS, environment, finish, per_fire, replica_env, wait_until
from .measure import next_instant, occurrences, summary_ms, target
from .replicas import Replicas


def run(
    replicas: int = 10,
    jobs: int = 10_000,
    period: int = 30,
    handler_ms: float = 10.0,
    max_concurrency: int | None = None,
    out: Path | None = None,
    name: str | None = None,
    timeout: float = 30.0,
) -> Path:
    name = name or f"b-r{replicas}"
    params = {
        "replicas": replicas,
        "jobs": jobs,
        "schedule": f"@every {period}s (enabled just before the measured instant)",
        "max_concurrency": max_concurrency or f"agent default ({DEFAULT_SLOTS})",
        "handler": f"records its start time (local wall clock), then sleeps {handler_ms:g} ms",
    }
    with cluster() as db, tempfile.TemporaryDirectory(prefix="claimsched-bench-") as folder:
        env = replica_env(max_concurrency) | {"BENCH_HANDLER_SLEEP": str(handler_ms / 1000)}
        result: dict[str, Any] = {"scenario": "b", "name": name, "params": params}
        result["environment"] = environment(db)
        db.execute(
            sql.INSERT_SCHEDULES,
            {"prefix": "b", "schedule": f"@every {period}s", "enabled": False, "count": jobs,
             "policy": "Forbid", "catch_up": "Latest"},
        )
        group = Replicas(db, Path(folder), jobs, "b", env)
        group.start(replicas)
        job_names = [f"b{i:05d}" for i in range(jobs)]
        try:
            result["startup_s"] = round(group.wait_ready(), 2)
            time.sleep(2.0)
            instant = next_instant(period, time.time() + 4.0)
            db.execute(sql.ENABLE_ALL)
            wait_until(instant - 1.5)
            stats0 = db.statements()
            group.mark_cpu("herd0")
            deadline = instant + timeout
            while time.time() < deadline:
                group.sample_rss()
                done = occurrences(group.starts(), job_names, [instant])
                if done["started"] >= jobs:
                    break
                time.sleep(0.25)
            time.sleep(1.0)  # completions of the last runs
            stats1 = db.statements()
            group.mark_cpu("herd1")
            measured_s = time.time() - (instant - 1.5)
        finally:
            group.stop()
        fires = occurrences(group.starts(), job_names, [instant])
        runs = db.execute(sql.RUNS_BETWEEN, {"start": instant, "end": instant + 0.001})
        problems = {"server_errors": db.server_errors(), "agent_log": group.problems()}

    first = fires.pop("first")
    offsets = [s.started - instant for s in first.values()]
    claim_offsets = [r[4] - r[1] for r in runs if r[4] is not None and r[2] != "skipped"]
    kinds = per_fire(stats1.since(stats0), jobs)
    total = sum(k["calls"] for k in kinds.values())
    counts = Counter(s.agent for s in first.values())
    per_replica = {n: counts.get(n, 0) for n in group.names}
    fair = jobs / replicas
    last = max(offsets) if offsets else None
    cpu = group.per_replica("herd0", "herd1", measured_s / 60)
    result.update(
        {
            "instant": instant,
            "fires": fires,
            "last_start_s": round(last, 3) if last is not None else None,
            "latency": {
                "handler_start": summary_ms(offsets),
                "claim_started_at": summary_ms(claim_offsets),
            },
            "spread": {
                "fair_share": fair,
                "runs_per_replica": per_replica,
                "max_over_fair": round(max(per_replica.values()) / fair, 2),
                "min_over_fair": round(min(per_replica.values()) / fair, 2),
            },
            "statements": {
                "total": total,
                "per_fire": round(total / jobs, 3),
                "by_kind": kinds,
            },
            "replicas": cpu,
        }
    )
    result["problems"] = problems
    result["targets"] = [
        target("last start after the instant, s", result["last_start_s"], 5.0),
        target("max runs per replica / fair share", result["spread"]["max_over_fair"], 1.5),
        target("duplicates", fires["duplicates"], 0),
        target("missed", fires["missed"], 0),
    ]
    out = out or Path(__file__).resolve().parent / "results"
    path = finish(result, out, name)
    plot.herd(result, offsets, out / f"{name}.png")
    return path
