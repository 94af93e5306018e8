"""The web view at scale: 1,000 schedules and 1,000,000 runs, `claimsched web` as a real
process with a SELECT-only role; the median time of each page's GET and the statements each
costs (pg_stat_statements of that role), and the plan of the overview's one statement.

    python -m bench.web_render [--schedules 1000] [--runs-per-schedule 1000] [--gets 7]

Writes bench/results/web-render.json and web-render.png. Targets: the overview under 1 s, and
a fixed number of statements per page.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from claimsched.db.queries import query
from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process

from . import plot
from .cluster import Cluster, cluster
from .common import RESULTS, environment, finish
from .measure import target

VIEWER = "bench_viewer"
SETUP_VIEWER = [
    f"CREATE ROLE {VIEWER} LOGIN",
    f"GRANT USAGE ON SCHEMA claimsched TO {VIEWER}",
    f"GRANT SELECT ON ALL TABLES IN SCHEMA claimsched TO {VIEWER}",
]
MIX = ("*/5 * * * *", "*/10 * * * *", "0 * * * *", "@every 15m")
STEPS = ("5 min", "10 min", "60 min", "15 min")  # each expression's period, as intervals
SCHEDULES = """
INSERT INTO claimsched.job_schedule (job_name, schedule, source, active_since)
SELECT 'w' || lpad(g::text, 5, '0'), (%(mix)s::text[])[1 + g %% 4], 'cli',
       now() - interval '60 days'
FROM generate_series(0, %(count)s - 1) AS g
"""
# One statement: k-th newest slot of each job; 1 in 97 slots never ran (missed), 1 in 20
# failed, 1 in 50 skipped, 1 in 200 orphaned and reclaimed, the newest running.
RUNS = """
INSERT INTO claimsched.job_runs (job_name, fire_time, status, claimed_by, attempt,
                                 orphan_count, started_at, finished_at, error)
SELECT s.job_name, t.fire_time,
       CASE WHEN k = 0 THEN 'running' WHEN k %% 20 = 3 THEN 'failed'
            WHEN k %% 50 = 7 THEN 'skipped' ELSE 'done' END,
       'bench-agent-' || (k %% 3), CASE WHEN k %% 200 = 11 THEN 2 ELSE 1 END,
       CASE WHEN k %% 200 = 11 THEN 1 ELSE 0 END,
       t.fire_time + interval '1 s', t.fire_time + interval '3 s',
       CASE WHEN k %% 20 = 3 THEN 'RuntimeError: bench failure ' || k END
FROM claimsched.job_schedule s
JOIN unnest(%(mix)s::text[], %(steps)s::interval[]) AS m(schedule, step) USING (schedule)
CROSS JOIN generate_series(0, %(per_job)s - 1) AS k
CROSS JOIN LATERAL (SELECT date_trunc('hour', now()) - k * m.step AS fire_time) AS t
WHERE k %% 97 <> 96
"""
# The attempt each retried run's reclaim superseded, as cs_reclaim_v2 keeps it: the overview
# and the schedule page read its owner.
ATTEMPTS = """
INSERT INTO claimsched.job_attempts (job_name, fire_time, attempt, run_id, claimed_by,
                                     started_at, ended_at, outcome, error)
SELECT r.job_name, r.fire_time, 1, r.id, 'bench-agent-9', r.fire_time, r.fire_time,
       'orphaned', 'lease expired (claimed by bench-agent-9, attempt 1)'
FROM claimsched.job_runs r
WHERE r.attempt = 2
"""
AGENTS = """
INSERT INTO claimsched.agents (agent_id, hostname, handlers, version, ttl_seconds)
SELECT 'bench-agent-' || a, 'bench', array_agg(s.job_name), 'bench', 86400
FROM claimsched.job_schedule s, generate_series(0, 2) AS a
GROUP BY a
"""


def _get(port: int, path: str) -> tuple[int, float, int]:
    began = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        size = len(response.read())
    finally:
        conn.close()
    return response.status, time.perf_counter() - began, size


def _page(db: Cluster, port: int, path: str, gets: int) -> dict[str, Any]:
    status, _, _ = _get(port, path)  # warm: the pool's first connection, plans
    assert status == 200, (path, status)
    before = db.statements(VIEWER)
    seconds, sizes = [], []
    for _ in range(gets):
        status, elapsed, size = _get(port, path)
        assert status == 200, (path, status)
        seconds.append(elapsed)
        sizes.append(size)
    kinds = db.statements(VIEWER).since(before)
    calls = sum(int(k["calls"]) for k in kinds.values())
    return {
        "path": path,
        "gets": gets,
        "median_s": round(statistics.median(seconds), 4),
        "max_s": round(max(seconds), 4),
        "bytes": sizes[-1],
        "statements_per_get": round(calls / gets, 2),
        "sql_ms_per_get": round(sum(k["total_ms"] for k in kinds.values()) / gets, 1),
        "by_kind": {name: int(k["calls"]) // gets for name, k in kinds.items()},
    }


def _explain(db: Cluster) -> list[str]:
    statement = query("web_schedules").replace("%(job_name)s", "NULL").replace(
        "%(recent)s", "30")
    db.execute("SET search_path = claimsched, public")
    rows = db.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + statement)
    return [r[0] for r in rows]


def run(schedules: int = 1000, runs_per_schedule: int = 1000, gets: int = 7,
        out: Path | None = None, name: str = "web-render") -> Path:
    params = {"schedules": schedules, "runs_per_schedule": runs_per_schedule, "gets": gets,
              "mix": list(MIX), "runs": "every slot back from the hour; 1 in 97 missing, 1 in 20 "
              "failed, 1 in 50 skipped, 1 in 200 reclaimed (its first attempt in job_attempts), "
              "the newest running"}
    with cluster() as db:
        result: dict[str, Any] = {"scenario": "web-render", "name": name, "params": params,
                                  "environment": environment(db)}
        began = time.perf_counter()
        for statement in SETUP_VIEWER:
            db.execute(statement)
        db.execute(SCHEDULES, {"count": schedules, "mix": list(MIX)})
        slots = runs_per_schedule + runs_per_schedule // 96  # 1 in 97 slots has no run
        db.execute(RUNS, {"mix": list(MIX), "steps": list(STEPS), "per_job": slots})
        db.execute(ATTEMPTS)
        db.execute(AGENTS)
        db.execute("VACUUM ANALYZE claimsched.job_runs")
        db.execute("VACUUM ANALYZE claimsched.job_attempts")
        db.execute("VACUUM ANALYZE claimsched.job_schedule")
        total = db.execute("SELECT count(*) FROM claimsched.job_runs")[0][0]
        result["setup"] = {"runs": total, "seconds": round(time.perf_counter() - began, 1)}
        result["plan"] = _explain(db)
        run_id = db.execute("SELECT max(id) FROM claimsched.job_runs")[0][0]
        port = free_port()
        log = (out or RESULTS) / f"{name}.server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as sink:
            server = subprocess.Popen(
                [sys.executable, "-m", "claimsched.cli", "web", "--bind", f"127.0.0.1:{port}",
                 "--dsn", db.pg.dsn_for("bench", VIEWER)],
                env=dict(os.environ), stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    _get(port, "/api/agents")
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        started = log.read_text()
                        raise RuntimeError(f"claimsched web did not start: {started}") from None
                    time.sleep(0.1)
            paths = ["/", "/api/schedules", "/schedules/w00001", f"/runs/{run_id}", "/agents"]
            result["pages"] = [_page(db, port, path, gets) for path in paths]
        finally:
            stop_process(server, 15)
            log.unlink(missing_ok=True)
    overview = result["pages"][0]
    result["targets"] = [
        target(f"overview GET, median seconds ({schedules} schedules, {total} runs)",
               overview["median_s"], 1.0),
        target("statements per overview GET", overview["statements_per_get"], 1),
        target("statements per schedule page GET", result["pages"][2]["statements_per_get"], 2),
    ]
    out = out or RESULTS
    path = finish(result, out, name)
    plot.web_render(result, out / f"{name}.png")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--runs-per-schedule", type=int, default=1000)
    parser.add_argument("--gets", type=int, default=7, help="timed GETs per page (7)")
    parser.add_argument("--out", type=Path, help="result folder (bench/results)")
    args = parser.parse_args(argv)
    path = run(args.schedules, args.runs_per_schedule, args.gets, args.out)
    import json

    for check in json.loads(path.read_text())["targets"]:
        print(f"{'met   ' if check['met'] else 'MISSED'} {check['metric']}: {check['value']} "
              f"(target {check['target']})")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
