"""Scenario e: many schedules. 100,000 jobs (99,000 daily cron at times spread over the day,
1,000 `@every 1s..60s`) on R replicas that each have a handler for every one of them.

Steady window W: CPU and RSS per replica, fire-to-start latency of every occurrence of the
frequent jobs (and of the daily ones that fell in the window), duplicates and misses.
Then schedule changes, one at a time: a daily job moves to another minute, and the harness
watches pg_stat_statements until every replica has read schedules after it (the agents' calls
of the statements that read `job_schedule` grew by R): that is when the change is visible to
every agent; the rows those reads returned, per replica, is what each read for it.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from . import plot, profiler, sql
from .cluster import Cluster, cluster
from .common import DEFAULT_SLOTS, environment, finish, per_fire, replica_env, wait_until
from .measure import summary_ms, target
from .replicas import Replicas, Start

PREFIX = "e"
# The statements that read schedules (sql/queries.sql): what a change costs an agent.
READS = ("load_schedules",)


def _reads(kinds: dict[str, dict[str, float]]) -> tuple[int, int]:
    """(calls, rows) of the statements that read schedules."""
    found = [v for k, v in kinds.items() if k.split()[0].startswith(READS)]
    return int(sum(v["calls"] for v in found)), int(sum(v["rows"] for v in found))


def _change_visible(db: Cluster, replicas: int, index: int, timeout: float) -> dict[str, Any]:
    """Move daily job `index` to another minute; seconds until every replica read schedules
    after it, and the rows they read."""
    job = f"{PREFIX}{index:05d}"
    before = db.statements()
    began = time.time()
    db.execute(sql.E_MOVE_ONE, {"job": job, "minute": (index * 7 + 31) % 60})
    deadline = began + timeout
    calls = rows = 0
    while time.time() < deadline:
        calls, rows = _reads(db.statements().since(before))
        if calls >= replicas:
            break
        time.sleep(0.01)
    seconds = time.time() - began
    return {
        "job": job,
        "visible_s": round(seconds, 3) if calls >= replicas else None,
        "reads": calls,
        "rows_per_replica": round(rows / replicas, 1),
        "loadavg": round(os.getloadavg()[0], 2),
    }


def _wait_claiming(db: Cluster, group: Replicas, timeout: float) -> float:
    """Until every replica has claimed a run (it has read its schedules); seconds since launch.
    An agent's first read of 100,000 schedules takes a while: the window starts after it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = db.execute(sql.CLAIMING_AGENTS)[0][0]
        if found >= len(group.running):
            return time.time() - group.launched_at
        time.sleep(1.0)
    raise RuntimeError(f"replicas not all claiming after {timeout} s")


def _latencies(starts: list[Start], periods: dict[str, int], t0: float, t_end: float
               ) -> dict[str, Any]:
    """Frequent jobs: every occurrence in [t0, t_end) expected, first start of each."""
    first: dict[tuple[str, float], float] = {}
    counted: Counter[tuple[str, float]] = Counter()
    daily: list[float] = []
    for start in starts:
        if not t0 <= start.fire_time < t_end:
            continue
        key = (start.job, round(start.fire_time, 3))
        counted[key] += 1
        late = start.started - start.fire_time
        if start.job in periods:
            first[key] = min(first.get(key, late), late)
        elif counted[key] == 1:
            daily.append(late)
    expected = sum(math.ceil(t_end / p - 1e-9) - math.ceil(t0 / p - 1e-9)
                   for p in periods.values())
    frequent = list(first.values())
    return {
        "frequent": frequent,
        "daily": daily,
        "expected": expected,
        "started": len(frequent),
        "missed": expected - len(frequent),
        "duplicates": sum(n - 1 for n in counted.values() if n > 1),
    }


def run(
    replicas: int = 10,
    jobs: int = 100_000,
    window: float = 120.0,
    warmup: float = 20.0,
    changes: int = 5,
    max_concurrency: int | None = None,
    out: Path | None = None,
    name: str | None = None,
    profile: bool = False,
) -> Path:
    name = name or f"e-r{replicas}-j{jobs}"
    out = out or Path(__file__).resolve().parent / "results"
    frequent = max(1, jobs // 100)
    daily = jobs - frequent
    params = {
        "replicas": replicas,
        "jobs": jobs,
        "mix": f"{daily} daily cron at spread minutes of the day, "
               f"{frequent} @every 1s..60s (the k-th: 1 + k % 60 s)",
        "window_s": window,
        "warmup_s": warmup,
        "changes": changes,
        "max_concurrency": max_concurrency or f"agent default ({DEFAULT_SLOTS})",
        "handler": "records its start time (local wall clock) and returns",
    }
    periods = {f"{PREFIX}{i:05d}": 1 + (i - daily) % 60 for i in range(daily, jobs)}
    with cluster() as db, tempfile.TemporaryDirectory(prefix="claimsched-bench-") as folder:
        result: dict[str, Any] = {"scenario": "e", "name": name, "params": params}
        result["environment"] = environment(db)
        db.execute(sql.E_SCHEDULES, {"prefix": PREFIX, "daily": daily, "count": jobs})
        db.execute("VACUUM ANALYZE claimsched.job_schedule")
        group = Replicas(db, Path(folder), jobs, PREFIX, replica_env(max_concurrency))
        group.start(replicas)
        try:
            result["startup_s"] = round(group.wait_ready(timeout=600.0), 2)
            result["schedules_read_s"] = round(_wait_claiming(db, group, 900.0), 2)
            t0 = math.ceil(time.time() + warmup)
            t_end = t0 + window
            wait_until(t0)
            stats0, cpu_db0 = db.statements(), db.db_cpu_seconds()
            group.mark_cpu("steady0")
            if profile:
                profiler.record(group.running[0], window - 1,
                                out / f"{name}-{group.running[0].name}-steady.folded")
            group.sleep_until(t_end)
            stats1, cpu_db1 = db.statements(), db.db_cpu_seconds()
            group.mark_cpu("steady1")
            visible = []
            for k in range(changes):
                time.sleep(2.0)
                visible.append(_change_visible(db, replicas, k * 997 % daily, 60.0))
        finally:
            group.stop()
            profiler.wait_all()
        problems = {"server_errors": db.server_errors(), "agent_log": group.problems()}
        logs = {r.name: r.log_tail(600) for r in group.running if r.process.returncode not in (0,)}
        starts = group.starts()

    lat = _latencies(starts, periods, t0, t_end)
    kinds = per_fire(stats1.since(stats0), max(1, lat["expected"]))
    rows = group.per_replica("steady0", "steady1", window / 60)
    cpu_mean = statistics.mean(r["cpu_s_per_min"] for r in rows)
    cpu_max = max(r["cpu_s_per_min"] for r in rows)
    rss_max = max(r["rss_mib_max"] for r in rows)
    seen = [v["visible_s"] for v in visible]
    worst = None if None in seen or not seen else max(s for s in seen if s is not None)
    read_rows = max((v["rows_per_replica"] for v in visible), default=None)
    result.update(
        {
            "latency": {
                "frequent": summary_ms(lat["frequent"]),
                "daily": summary_ms(lat["daily"]),
                "definition": "wall clock read by the handler minus fire_time (same host and "
                "clock as Postgres), first start of each occurrence in the window",
            },
            "fires": {k: lat[k] for k in ("expected", "started", "missed", "duplicates")},
            "statements": {
                "total": sum(k["calls"] for k in kinds.values()),
                "per_fire": round(sum(k["calls"] for k in kinds.values())
                                  / max(1, lat["expected"] + len(lat["daily"])), 3),
                "by_kind": kinds,
            },
            "changes": visible,
            "cpu_s_per_replica_per_min": {"mean": round(cpu_mean, 3), "max": cpu_max},
            "db_cpu_s_per_min": round((cpu_db1 - cpu_db0) / (window / 60), 3),
            "rss_mib_per_replica": {
                "max": rss_max,
                "mean": round(statistics.mean(r["rss_mib_mean"] for r in rows), 1),
            },
            "replicas": rows,
            "problems": problems,
            "replica_logs_on_failure": logs,
        }
    )
    result["targets"] = [
        target("RSS MiB per replica (max)", rss_max, 60),
        target("CPU s per replica per minute (max)", cpu_max, 0.3),
        target("frequent jobs: fire-to-start p99 ms", result["latency"]["frequent"]["p99_ms"],
               250),
        target("schedule change visible to every agent, s (worst)", worst, 1.0),
        target("rows each agent reads for one change (worst)", read_rows, 1),
        target("duplicates", lat["duplicates"], 0),
        target("missed", lat["missed"], 0),
    ]
    path = finish(result, out, name)
    plot.many(result, lat["frequent"], lat["daily"], out / f"{name}.png")
    return path
