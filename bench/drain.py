"""Scenario f: a backfill drains. N past occurrences of one daily job (concurrencyPolicy Allow)
are queued at once, as `claimsched backfill` queues them, on R replicas of S worker slots.

Each handler records its start and sleeps `handler_ms` (10 ms). The replicas keep the default
housekeeping period: the backlog must drain at claim speed, not one housekeeping period at a
time. Measured: how long after the queueing the last run was done, the curve of runs done over
time (the plot), the runs each replica took (every one should take part: request_runs' NOTIFY
wakes them all), the statements the agents sent per run, and duplicates (none).
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from claimsched.db import Store

from . import plot, sql
from .cluster import Cluster, cluster
from .common import environment, finish, per_fire, replica_env
from .measure import summary_ms, target
from .replicas import Replicas

JOB_PREFIX = "f"
POLL_SECONDS = 0.05  # between two counts of the runs done


def run(
    replicas: int = 4,
    backlog: int = 1000,
    handler_ms: float = 10.0,
    max_concurrency: int | None = 16,
    out: Path | None = None,
    name: str | None = None,
    timeout: float = 120.0,
) -> Path:
    name = name or f"f-r{replicas}-n{backlog}"
    job = f"{JOB_PREFIX}00000"
    params = {
        "replicas": replicas,
        "backlog": backlog,
        "schedule": "@daily, concurrencyPolicy Allow; the backlog: its last N midnights (UTC)",
        "max_concurrency": max_concurrency,
        "housekeeping": "agent default",
        "handler": f"records its start time (local wall clock), then sleeps {handler_ms:g} ms",
    }
    with cluster() as db, tempfile.TemporaryDirectory(prefix="claimsched-bench-") as folder:
        env = replica_env(max_concurrency) | {"BENCH_HANDLER_SLEEP": str(handler_ms / 1000)}
        result: dict[str, Any] = {"scenario": "f", "name": name, "params": params}
        result["environment"] = environment(db)
        db.execute(sql.INSERT_SCHEDULES, {"prefix": JOB_PREFIX, "schedule": "@daily",
                                          "enabled": True, "count": 1, "policy": "Allow",
                                          "catch_up": "None"})
        group = Replicas(db, Path(folder), 1, JOB_PREFIX, env)
        group.start(replicas)
        requester = Store(db.operator_dsn, max_size=1, name="bench-backfill")
        try:
            result["startup_s"] = round(group.wait_ready(), 2)
            time.sleep(2.0)  # past every replica's first claim pass
            today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            fire_times = [today - timedelta(days=n) for n in range(backlog, 0, -1)]
            stats0 = db.statements()
            group.mark_cpu("drain0")
            queued_at = time.time()
            queued = len(requester.listings.queue_runs(job, fire_times, "backfill"))
            curve = _drain(db, job, backlog, queued_at, timeout)
            stats1 = db.statements()
            group.mark_cpu("drain1")
        finally:
            requester.close()
            group.stop()
        starts = [s for s in group.starts() if s.job == job]
        owners = dict(db.execute(sql.RUN_OWNERS, {"job": job}))
        problems = {"server_errors": db.server_errors(), "agent_log": group.problems()}

    drained = curve[-1][0] if curve and curve[-1][1] >= backlog else None
    started = Counter(round(s.fire_time, 3) for s in starts)
    kinds = per_fire(stats1.since(stats0), backlog)
    total = sum(k["calls"] for k in kinds.values())
    per_replica = {n: int(owners.get(n, 0)) for n in group.names}
    result.update(
        {
            "queued": queued,
            "drained_s": round(drained, 3) if drained is not None else None,
            "done_at_s": {f"{share}%": _reached(curve, backlog * share / 100)
                          for share in (10, 50, 90, 100)},
            "latency": {"queue_to_start": summary_ms([s.started - queued_at for s in starts])},
            "runs": {
                "started": len(started),
                "duplicates": sum(n - 1 for n in started.values() if n > 1),
                "per_replica": per_replica,
                "replicas_taking_part": sum(1 for n in per_replica.values() if n),
            },
            "statements": {"total": total, "per_run": round(total / backlog, 3),
                           "by_kind": kinds},
            "replicas": group.per_replica("drain0", "drain1", max(drained or timeout, 1) / 60),
        }
    )
    result["problems"] = problems
    result["targets"] = [
        target("all done after queueing, s", result["drained_s"], 15.0),
        target("replicas taking part", result["runs"]["replicas_taking_part"], replicas,
               better="higher"),
        target("duplicates", result["runs"]["duplicates"], 0),
    ]
    out = out or Path(__file__).resolve().parent / "results"
    path = finish(result, out, name)
    plot.drain(result, curve, out / f"{name}.png")
    return path


def _drain(db: Cluster, job: str, backlog: int, queued_at: float,
           timeout: float) -> list[tuple[float, int]]:
    """(seconds since queueing, runs done) until all are done or `timeout` has passed."""
    curve: list[tuple[float, int]] = []
    while time.time() < queued_at + timeout:
        done = db.execute(sql.RUNS_DONE, {"job": job})[0][0]
        curve.append((time.time() - queued_at, int(done)))
        if done >= backlog:
            break
        time.sleep(POLL_SECONDS)
    return curve


def _reached(curve: list[tuple[float, int]], count: float) -> float | None:
    """Seconds after queueing when at least `count` runs were done."""
    return next((round(at, 3) for at, done in curve if done >= count), None)
