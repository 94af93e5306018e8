"""pgbench on the same server, same table (a migrated claimsched schema in its own database),
same client count: what the database can do with the claim's statement shape.

Scripts (B rows a statement, distinct keys drawn at random):
- insert: raw `INSERT .. SELECT FROM unnest(..) ON CONFLICT DO NOTHING RETURNING id`;
- claim: the agents' own call of cs_claim_v2 (sql/functions/), candidates built in SQL.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from claimsched.db.queries import call
from claimsched.tools.postgres import TemporaryPostgres

from . import sql
from .cluster import Cluster

_KEYS = """\\set j random(0, {last})
\\set r random(1, 1000000000000)
"""
_JOBS = (
    "(SELECT array_agg('c' || lpad((((:j)::int + g) % {jobs})::text, 5, '0')) "
    "FROM generate_series(1, {batch}) AS g)"
)
_FIRE = "array_fill(now() - make_interval(secs => (:r)::float8 / 1000000), ARRAY[{batch}])"

INSERT = """INSERT INTO claimsched.job_runs (job_name, fire_time, kind, status, claimed_by,
                                 lease_until, attempt, started_at)
SELECT c.job_name, c.fire_time, 'scheduled', 'running', 'pgbench', now() + interval '120 s', 1,
       now()
FROM unnest({jobs_array}::text[], {fire_array}::timestamptz[]) AS c(job_name, fire_time)
ON CONFLICT (job_name, fire_time) DO NOTHING
RETURNING id;
"""


# Every schedule's active_since (prepare() sets it), as a literal: an agent sends the version it
# holds, it does not read it for each statement.
SINCE = "2000-01-01 00:00:00+00"
_SINCE = "array_fill('{since}'::timestamptz, ARRAY[{batch}])"


def script(kind: str, batch: int, jobs: int) -> str:
    jobs_array = _JOBS.format(jobs=jobs, batch=batch)
    fire_array = _FIRE.format(batch=batch)
    head = _KEYS.format(last=jobs - 1)
    if kind == "insert":
        return head + INSERT.format(jobs_array=jobs_array, fire_array=fire_array)
    body = call("cs_claim_v2", "claimsched")
    for name, value in {
        "jobs": jobs_array,
        "fire_times": fire_array,
        "wants": f"array_fill('running'::text, ARRAY[{batch}])",
        "reasons": f"array_fill(NULL::text, ARRAY[{batch}])",
        "latest": f"array_fill(true, ARRAY[{batch}])",
        # prepare() gives every schedule one active_since: the version candidates carry
        "since": _SINCE.format(since=SINCE, batch=batch),
        "capacity": str(batch),
        "agent_id": "'pgbench'",
    }.items():
        body = body.replace(f"%({name})s", value)
    body = re.sub(
        r"\b(job_runs|job_schedule|forbid_in_progress)\b", r"claimsched.\1", body
    )
    return head + body + ";\n"


def prepare(cluster: Cluster, jobs: int) -> None:
    """Schedules for the claim script (Allow: no Forbid look-up), active since SINCE."""
    with _connect(cluster) as conn:
        conn.execute(
            sql.INSERT_SCHEDULES,
            {"prefix": "c", "schedule": "@every 1s", "enabled": True, "count": jobs,
             "policy": "Allow", "catch_up": "Latest"},
        )
        conn.execute("UPDATE claimsched.job_schedule SET active_since = %s", [SINCE])


def _connect(cluster: Cluster) -> Any:
    import psycopg

    return psycopg.connect(cluster.pgbench_dsn(), autocommit=True)


def run(
    cluster: Cluster, kind: str, batch: int, clients: int, jobs: int, seconds: float,
    folder: Path,
) -> dict[str, Any]:
    """One pgbench run on a freshly emptied job_runs; tps and rows per second."""
    with _connect(cluster) as conn:
        conn.execute("TRUNCATE claimsched.job_runs")
        conn.execute("VACUUM ANALYZE claimsched.job_runs")
    assert isinstance(cluster.pg, TemporaryPostgres), "pgbench runs against one standalone server"
    path = folder / f"pgbench-{kind}-{batch}.sql"
    path.write_text(script(kind, batch, jobs))
    command = [
        str(cluster.pg.bindir / "pgbench"), "-n", "-M", "prepared", "-c", str(clients),
        "-j", str(min(clients, 2)), "-T", str(int(seconds)), "-f", str(path),
        "-h", "127.0.0.1", "-p", str(cluster.pg.port), "-U", "postgres", sql.PGBENCH_DATABASE,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"pgbench failed: {done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    with _connect(cluster) as conn:
        inserted = conn.execute("SELECT count(*) FROM claimsched.job_runs").fetchone()[0]
    tps = float(found.group(1))
    failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
    return {
        "statement": kind,
        "rows_per_statement": batch,
        "clients": clients,
        "seconds": seconds,
        "tps": round(tps, 1),
        "rows_per_s": round(tps * batch, 1),
        "rows_inserted": inserted,
        "failed_transactions": int(failed.group(1)) if failed else 0,
        "command": "pgbench " + " ".join(command[1:10]) + " -f " + path.name,
    }
