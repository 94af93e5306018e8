"""Scenario d: the operator's status refresh with many ClaimSchedules, called in-process.

10,000 operator-owned schedules (hourly, half-hourly and daily cron, `@every 1h`) active for
`history_days`, a day of runs for each (some failed, orphaned, running, missing), three live
agents. `claimsched_operator.observations.refresh` runs against them as the operator's own
role, so pg_stat_statements counts exactly its statements. The first refresh of a fresh operator
(cold: its occurrence counters start empty) is timed apart from the later ones (warm), at two
sizes to show whether the statement count stays constant.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import parse_schedule

from . import plot, sql
from .cluster import cluster
from .common import environment, finish, per_fire
from .measure import target


def _limits(schedules: int) -> tuple[float, float]:
    """Issue 15's (warm, cold) seconds per refresh: 0.5 / 1 s at 10,000 schedules, 5 / 8 s at
    100,000; in between, the nearer size's."""
    return (0.5, 1.0) if schedules <= 30_000 else (5.0, 8.0)


def run(
    jobs: int = 10000,
    refreshes: int = 5,
    history_days: int = 7,
    out: Path | None = None,
    name: str | None = None,
) -> Path:
    from claimsched_operator import observations

    name = name or f"d-{jobs}"
    sizes = sorted({max(1, jobs // 10), jobs})
    params = {
        "schedules": jobs,
        "sizes": sizes,
        "warm_refreshes": refreshes,
        "history_days": history_days,
        "retention_days": 90,
        "mix": "0 * * * *, */30 * * * *, 15 3 * * *, @every 1h (a quarter each)",
        "runs": "the last day of each schedule; every 50th occurrence missing",
    }
    with cluster() as db:
        result: dict[str, Any] = {"scenario": "d", "name": name, "params": params}
        result["environment"] = environment(db)
        began = time.perf_counter()
        db.execute(sql.D_SCHEDULES, {"count": jobs})
        db.execute(sql.D_ACTIVE_SINCE, {"days": history_days})
        db.execute(sql.D_RUNS, {"pattern": "d%"})
        db.execute(sql.D_LIVE_AGENTS)
        db.execute("VACUUM ANALYZE claimsched.job_runs")
        db.execute("VACUUM ANALYZE claimsched.job_schedule")
        rows = db.execute("SELECT count(*) FROM claimsched.job_runs")[0][0]
        result["setup"] = {"runs": rows, "seconds": round(time.perf_counter() - began, 1)}
        records = db.execute(
            "SELECT job_name, schedule, time_zone FROM claimsched.job_schedule ORDER BY 1"
        )
        parsed = {job: parse_schedule(expr, zone, job) for job, expr, zone in records}
        store = Store(db.operator_dsn, max_size=4, name="bench-operator")
        store.open()
        owned = OwnedSchedules(store)
        sizes_out = []
        try:
            for size in sizes:
                subset = dict(list(parsed.items())[:size])
                counter, history = observations.OccurrenceCounter(), observations.SettledHistory()
                before = db.statements(sql.OPERATOR_ROLE)
                began = time.perf_counter()
                observed = observations.refresh(owned, subset, counter, 90, history=history)
                cold = time.perf_counter() - began
                after_cold = db.statements(sql.OPERATOR_ROLE)
                warm = []
                for _ in range(refreshes):
                    began = time.perf_counter()
                    observed = observations.refresh(owned, subset, counter, 90, observed,
                                                        history=history)
                    warm.append(time.perf_counter() - began)
                after = db.statements(sql.OPERATOR_ROLE)
                cold_kinds = per_fire(after_cold.since(before), 1)
                warm_kinds = per_fire(after.since(after_cold), refreshes)
                warm_sql_ms = sum(k["total_ms"] for k in warm_kinds.values()) / refreshes
                sizes_out.append(
                    {
                        "schedules": size,
                        "observed": len(observed),
                        "cold_s": round(cold, 3),
                        "warm_s": {
                            "mean": round(statistics.mean(warm), 3),
                            "max": round(max(warm), 3),
                        },
                        "warm_sql_exec_ms": round(warm_sql_ms, 1),
                        "warm_rest_s": round(statistics.mean(warm) - warm_sql_ms / 1000, 3),
                        "statements_cold": sum(k["calls"] for k in cold_kinds.values()),
                        "statements_per_refresh": round(
                            sum(k["calls"] for k in warm_kinds.values()) / refreshes, 2
                        ),
                        "by_kind": warm_kinds,
                        "missed_total": sum(o.status.missed_runs.total for o in observed.values()),
                    }
                )
        finally:
            store.close()

    result["sizes"] = sizes_out
    largest = sizes_out[-1]
    constant = len({s["statements_per_refresh"] for s in sizes_out}) == 1
    warm_limit, cold_limit = _limits(largest["schedules"])
    result["targets"] = [
        target(f"seconds per refresh, {largest['schedules']} schedules (warm)",
               largest["warm_s"]["mean"], warm_limit),
        target(f"seconds for the first refresh, {largest['schedules']} schedules (cold)",
               largest["cold_s"], cold_limit),
        target("statements per refresh", largest["statements_per_refresh"], 1),
        {"metric": "statements per refresh constant over sizes",
         "value": [s["statements_per_refresh"] for s in sizes_out], "target": "constant",
         "met": constant},
    ]
    out = out or Path(__file__).resolve().parent / "results"
    path = finish(result, out, name)
    plot.status(result, out / f"{name}.png")
    return path
