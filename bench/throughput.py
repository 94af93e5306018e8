"""Scenario c: claim throughput. J jobs `@every 1s` (offered load J claims/s, above what the
agents can take) on R replicas with many worker slots: every claim statement finds more due
occurrences than it has room for. Claims per second = handler starts in the window / window.

Then, with the replicas stopped, pgbench on the same server and table with R clients:
the raw `INSERT .. SELECT unnest .. ON CONFLICT DO NOTHING RETURNING` with the agents' mean
rows per claim statement (the ratio's denominator) and with one row, and the agents' own claim
statement with the same rows per statement.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from . import pgbench, plot, sql
from .cluster import cluster
from .common import DEFAULT_SLOTS, environment, finish, per_fire, replica_env, wait_until
from .measure import target
from .replicas import Replicas


def run(
    replicas: int = 4,
    jobs: int = 2000,
    period: int = 1,
    window: float = 30.0,
    warmup: float = 5.0,
    max_concurrency: int | None = 200,
    pgbench_seconds: float = 10.0,
    out: Path | None = None,
    name: str | None = None,
) -> Path:
    name = name or f"c-r{replicas}"
    params = {
        "replicas": replicas,
        "jobs": jobs,
        "schedule": f"@every {period}s",
        "offered_per_s": jobs / period,
        "window_s": window,
        "warmup_s": warmup,
        "max_concurrency": max_concurrency or f"agent default ({DEFAULT_SLOTS})",
        "pgbench_seconds": pgbench_seconds,
    }
    with cluster() as db, tempfile.TemporaryDirectory(prefix="claimsched-bench-") as folder:
        env = replica_env(max_concurrency)
        result: dict[str, Any] = {"scenario": "c", "name": name, "params": params}
        result["environment"] = environment(db)
        db.execute(
            sql.INSERT_SCHEDULES,
            {"prefix": "c", "schedule": f"@every {period}s", "enabled": True, "count": jobs,
             "policy": "Forbid", "catch_up": "Latest"},
        )
        group = Replicas(db, Path(folder), jobs, "c", env)
        group.start(replicas)
        try:
            result["startup_s"] = round(group.wait_ready(), 2)
            w0 = time.time() + warmup
            w1 = w0 + window
            wait_until(w0)
            stats0 = db.statements()
            group.mark_cpu("c0")
            group.sleep_until(w1)
            stats1 = db.statements()
            group.mark_cpu("c1")
        finally:
            group.stop()
        starts = [s for s in group.starts() if w0 <= s.started < w1]
        problems = {"server_errors": db.server_errors(), "agent_log": group.problems()}
        inserted = dict(db.execute(sql.RUNS_STARTED_BETWEEN, {"start": w0, "end": w1}))
        kinds = per_fire(stats1.since(stats0), max(1, len(starts)))
        claim_calls = sum(v["calls"] for k, v in kinds.items() if k.split()[0] == "claim")
        rows_inserted = sum(inserted.values())
        batch = max(1, round(rows_inserted / claim_calls)) if claim_calls else 1
        pgbench.prepare(db, jobs)
        folder_path = Path(folder)
        bench_runs = {
            f"insert x{batch}": pgbench.run(db, "insert", batch, replicas, jobs,
                                            pgbench_seconds, folder_path),
            "insert x1": pgbench.run(db, "insert", 1, replicas, jobs, pgbench_seconds,
                                     folder_path),
            f"claim statement x{batch}": pgbench.run(db, "claim", batch, replicas, jobs,
                                                     pgbench_seconds, folder_path),
        }

    claims_per_s = len(starts) / window
    per_second = Counter(int(s.started - w0) for s in starts)
    timeline = [per_second.get(i, 0) for i in range(int(window))]
    total = sum(k["calls"] for k in kinds.values())
    denominator = bench_runs[f"insert x{batch}"]["rows_per_s"]
    result.update(
        {
            "agents": {
                "claims_per_s": round(claims_per_s, 1),
                "saturated": claims_per_s < 0.95 * jobs / period,
                "rows_inserted_per_s": round(rows_inserted / window, 1),
                "rows_by_status": inserted,
                "rows_per_claim_statement": round(rows_inserted / claim_calls, 2)
                if claim_calls else None,
                "duplicates": len(starts) - len({(s.job, s.fire_time) for s in starts}),
            },
            "pgbench": bench_runs,
            "ratio": round(claims_per_s / denominator, 4),
            "ratio_to": f"pgbench insert x{batch}, {replicas} clients",
            "ratios": {label: round(claims_per_s / entry["rows_per_s"], 4)
                       for label, entry in bench_runs.items()},
            "statements": {
                "total": total,
                "per_claim": round(total / max(1, len(starts)), 3),
                "by_kind": kinds,
            },
            "replicas": group.per_replica("c0", "c1", window / 60),
        }
    )
    result["problems"] = problems
    result["targets"] = [
        target("claims/s over pgbench rows/s (same shape, clients)", result["ratio"], 0.5,
               "higher"),
        target("duplicates", result["agents"]["duplicates"], 0),
    ]
    out = out or Path(__file__).resolve().parent / "results"
    path = finish(result, out, name)
    plot.throughput(result, timeline, out / f"{name}.png")
    return path
