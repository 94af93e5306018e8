"""The wide soak: the chaos storm's jobs and faults, plus 1,000 light jobs `@every 1s`.

The storm's jobs (named j..) keep every interesting shape (Forbid overruns, backfills, triggers,
run.once freezes, the reclaimer paused past its lease) and the per-occurrence Python checks of
checker.py, which read them through views (`scope`). The light jobs (named w....) each record one
effect with one cheap statement (app.py `_light_handler`: the receipt and a public.wide_ledger
row in one transaction); at a million occurrences they are checked in SQL over the whole ledger,
job_runs and job_attempts (WIDE_CHECKS), more strictly than per occurrence: every occurrence due
up to the cutoff ran exactly once and is done, by the attempt that wrote its effect or after it,
and every superseded attempt was finished by a later one.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from .config import ChaosConfig
from .storm import ChaosRun

LIGHT = "w"  # light job names begin so, and sort after every storm job (j..)
LIGHT_MAX_ATTEMPTS = 10  # dense faults fail a few attempts of one occurrence in a row

VIEWS = """
CREATE OR REPLACE VIEW public.heavy_runs AS
    SELECT * FROM claimsched.job_runs WHERE job_name < 'w';
CREATE OR REPLACE VIEW public.heavy_effects AS
    SELECT *, xmin FROM claimsched.job_effects WHERE job_name < 'w';  -- commit times
CREATE OR REPLACE VIEW public.heavy_attempts AS
    SELECT * FROM claimsched.job_attempts WHERE job_name < 'w';
"""

# Every occurrence of a light job due after its schedule became active, up to %(cutoff)s.
EXPECTED = """
WITH expected AS (
    SELECT s.job_name, to_timestamp(t) AS fire_time
    FROM claimsched.job_schedule s,
         generate_series(floor(extract(epoch FROM s.active_since))::bigint + 1,
                         floor(extract(epoch FROM %(cutoff)s::timestamptz))::bigint) AS t
    WHERE s.job_name >= 'w'
)
"""

# name -> a query of offending rows (each row one violation, as text); %(cutoff)s the last fire
# time checked. Every one must return nothing.
WIDE_CHECKS: dict[str, str] = {
    "missed occurrence": EXPECTED
    + """
SELECT format('%%s @ %%s: due, but no run finished it (its run: %%s)', e.job_name, e.fire_time,
              coalesce(r.status || ' attempt ' || r.attempt, 'none'))
FROM expected e
LEFT JOIN claimsched.job_runs r ON r.job_name = e.job_name AND r.fire_time = e.fire_time
WHERE r.status IS DISTINCT FROM 'done'
""",
    "occurrence claimed twice": """
SELECT format('%%s @ %%s: %%s job_runs rows', job_name, fire_time, count(*))
FROM claimsched.job_runs WHERE job_name >= 'w'
GROUP BY job_name, fire_time HAVING count(*) > 1
""",
    "run not finished as done": """
SELECT format('%%s @ %%s: ended %%s after attempt %%s (%%s)', job_name, fire_time, status, attempt,
              coalesce(error, 'no error'))
FROM claimsched.job_runs WHERE job_name >= 'w' AND status <> 'done'
""",
    "duplicate effect": """
SELECT format('%%s @ %%s: the effect happened %%s times (attempts %%s)', job, fire_time, count(*),
              string_agg(agent || '#' || attempt, ', '))
FROM public.wide_ledger GROUP BY job, fire_time HAVING count(*) > 1
""",
    "done without its effect": """
SELECT format('%%s @ %%s: done by %%s attempt %%s with no effect in the ledger', r.job_name,
              r.fire_time, r.claimed_by, r.attempt)
FROM claimsched.job_runs r
WHERE r.job_name >= 'w' AND r.status = 'done'
  AND NOT EXISTS (SELECT 1 FROM public.wide_ledger l
                  WHERE l.job = r.job_name AND l.fire_time = r.fire_time)
""",
    "effect without receipt": """
SELECT format('%%s @ %%s: the effect of %%s attempt %%s has no receipt of that attempt', l.job,
              l.fire_time, l.agent, l.attempt)
FROM public.wide_ledger l
WHERE NOT EXISTS (SELECT 1 FROM claimsched.job_effects f
                  WHERE f.job_name = l.job AND f.fire_time = l.fire_time
                    AND f.entity = 'tick' AND f.attempt = l.attempt)
""",
    "receipt without the app's write": """
SELECT format('%%s @ %%s: a receipt of attempt %%s without the app''s write', f.job_name,
              f.fire_time, f.attempt)
FROM claimsched.job_effects f
WHERE f.job_name >= 'w'
  AND NOT EXISTS (SELECT 1 FROM public.wide_ledger l
                  WHERE l.job = f.job_name AND l.fire_time = f.fire_time)
""",
    # The effect's attempt held the lease: it is the run's last attempt, or a superseded one
    # that the same agent held; and no attempt after the one that wrote the effect wrote again.
    "effect without a lease": """
SELECT format('%%s @ %%s: effect by %%s attempt %%s, which never held the run (last attempt: '
              '%%s by %%s)', l.job, l.fire_time, l.agent, l.attempt, r.attempt, r.claimed_by)
FROM public.wide_ledger l
LEFT JOIN claimsched.job_runs r ON r.job_name = l.job AND r.fire_time = l.fire_time
WHERE r.id IS NULL OR l.attempt > r.attempt
   OR (l.attempt = r.attempt AND l.agent IS DISTINCT FROM r.claimed_by)
   OR (l.attempt < r.attempt AND NOT EXISTS (
           SELECT 1 FROM claimsched.job_attempts a
           WHERE a.job_name = l.job AND a.fire_time = l.fire_time AND a.attempt = l.attempt
             AND a.claimed_by IS NOT DISTINCT FROM l.agent))
""",
    # every attempt but the last was superseded and kept, once
    "superseded attempt not kept": """
SELECT format('%%s @ %%s: attempt %%s of %%s has %%s job_attempts rows', r.job_name, r.fire_time,
              n, r.attempt, coalesce(a.rows, 0))
FROM claimsched.job_runs r
CROSS JOIN LATERAL generate_series(1, r.attempt - 1) AS n
LEFT JOIN LATERAL (SELECT count(*) AS rows FROM claimsched.job_attempts a
                   WHERE a.job_name = r.job_name AND a.fire_time = r.fire_time
                     AND a.attempt = n) a ON true
WHERE r.job_name >= 'w' AND r.attempt > 1 AND coalesce(a.rows, 0) <> 1
""",
    # a run that failed only because it was fenced out (or orphaned, or failed on a fault) was
    # finished by a later attempt
    "fenced-out attempt never finished by a later attempt": """
SELECT format('%%s @ %%s: attempt %%s by %%s ended %%s, and no later attempt finished (the run: '
              '%%s attempt %%s)', a.job_name, a.fire_time, a.attempt, a.claimed_by, a.outcome,
              coalesce(r.status, 'gone'), r.attempt)
FROM claimsched.job_attempts a
LEFT JOIN claimsched.job_runs r ON r.job_name = a.job_name AND r.fire_time = a.fire_time
WHERE a.job_name >= 'w'
  AND (r.id IS NULL OR r.status <> 'done' OR r.attempt <= a.attempt OR r.id <> a.run_id)
""",
}

STATS = {
    "light_occurrences_checked": EXPECTED + "SELECT count(*) FROM expected",  # noqa: S608
    "light_runs": "SELECT count(*) FROM claimsched.job_runs WHERE job_name >= 'w'",
    "light_effects": "SELECT count(*) FROM public.wide_ledger",
    "light_superseded_attempts": "SELECT count(*) FROM claimsched.job_attempts "
    "WHERE job_name >= 'w'",
    "light_runs_retried": "SELECT count(*) FROM claimsched.job_runs "
    "WHERE job_name >= 'w' AND attempt > 1",
    "light_max_attempt": "SELECT coalesce(max(attempt), 0) FROM claimsched.job_runs "
    "WHERE job_name >= 'w'",
}

# fire to the effect's commit (the light handler's only write), per second of fire time
LATENCY_BY_SECOND = """
SELECT extract(epoch FROM fire_time)::float8 AS fire, count(*),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at - fire_time)::float8),
       percentile_disc(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM at - fire_time)::float8),
       max(extract(epoch FROM at - fire_time))::float8
FROM public.wide_ledger WHERE fire_time <= %(cutoff)s GROUP BY fire_time ORDER BY fire_time
"""

LATENCY = """
SELECT percentile_disc(ARRAY[0.5, 0.9, 0.99, 0.999]) WITHIN GROUP
           (ORDER BY extract(epoch FROM at - fire_time)::float8),
       max(extract(epoch FROM at - fire_time))::float8
FROM public.wide_ledger WHERE fire_time <= %(cutoff)s
"""

# effects committed per second of the storm (throughput)
EFFECTS_BY_SECOND = """
SELECT floor(extract(epoch FROM at))::float8, count(*) FROM public.wide_ledger GROUP BY 1 ORDER BY 1
"""

# fire times the light jobs still owe: none once they caught up to %(cutoff)s
OWED = EXPECTED + """
SELECT count(*) FROM expected e
WHERE NOT EXISTS (SELECT 1 FROM claimsched.job_runs r
                  WHERE r.job_name = e.job_name AND r.fire_time = e.fire_time
                    AND r.status = 'done')
"""  # noqa: S608


def light_jobs(count: int) -> list[dict[str, Any]]:
    """`count` jobs @every 1s: Allow, catch up All, retried up to LIGHT_MAX_ATTEMPTS times."""
    return [
        {
            "name": f"{LIGHT}{index:04d}",
            "kind": "light",
            "period": 1,
            "schedule": "@every 1s",
            "concurrency_policy": "Allow",
            "catch_up_policy": "All",
            "lease_seconds": 5,
            "heartbeat_seconds": 1,
            "retry_on_failure": True,
            "max_attempts": LIGHT_MAX_ATTEMPTS,
        }
        for index in range(count)
    ]


def wide_check(conn: psycopg.Connection[Any], cutoff: datetime,
               keep: int = 30) -> tuple[dict[str, int], list[str]]:
    """Run every WIDE_CHECKS query: (violations found by check, the first `keep` of each)."""
    counts: dict[str, int] = {}
    found: list[str] = []
    for name, statement in WIDE_CHECKS.items():
        rows = conn.execute(statement, {"cutoff": cutoff}).fetchall()
        counts[name] = len(rows)
        found += [f"{name}: {row[0]}" for row in rows[:keep]]
    return counts, found


class WideRun(ChaosRun):
    """A chaos storm whose replicas also run `light` light jobs @every 1s, checked in SQL."""

    def __init__(self, cfg: ChaosConfig, folder: Path, light: int, log: Any = None) -> None:
        super().__init__(cfg, folder, log)
        self.extra_jobs = light_jobs(light)
        self.setup_sql = VIEWS
        self.scope = {
            "runs": "public.heavy_runs",
            "effects": "public.heavy_effects",
            "attempts": "public.heavy_attempts",
        }
        self.wide: dict[str, Any] = {}

    def _env(self) -> dict[str, str]:
        # a thousand runs a second: DEBUG lines (claimed, started) would cost a core
        return {**super()._env(), "CLAIMSCHED_LOG_LEVEL": "INFO"}

    def _catch_up(self) -> dict[str, datetime]:
        cutoff = super()._catch_up()
        (light_cutoff,) = self.query("SELECT date_trunc('second', now()) - interval '2 s'")[0]
        deadline = self.cfg.settle_timeout
        owed = -1
        until = time.monotonic() + deadline
        while time.monotonic() < until:
            ((owed,),) = self.query(OWED, {"cutoff": light_cutoff})
            if not owed:
                break
            time.sleep(1.0)
        else:
            self.violation(f"light jobs never caught up within {deadline}s: {owed} owed")
        self.wide["cutoff"] = light_cutoff
        return cutoff

    def _check(self, cutoff: dict[str, datetime]) -> dict[str, Any]:
        light_cutoff = self.wide["cutoff"]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            counts, found = wide_check(conn, light_cutoff)
            stats = {
                name: conn.execute(statement, {"cutoff": light_cutoff}).fetchone()[0]  # type: ignore[index]
                for name, statement in STATS.items()
            }
            quantiles, worst = conn.execute(LATENCY, {"cutoff": light_cutoff}).fetchone()  # type: ignore[misc]
            by_second = conn.execute(LATENCY_BY_SECOND, {"cutoff": light_cutoff}).fetchall()
            effects = conn.execute(EFFECTS_BY_SECOND).fetchall()
        self.violations.extend(found)
        report = super()._check(cutoff)
        wall0 = report["storm_began_at"]
        report["light_jobs"] = len(self.extra_jobs)
        report["light_cutoff"] = light_cutoff.isoformat()
        report["light_checks"] = counts
        report.update(stats)
        report["heavy_occurrences_checked"] = report["occurrences_checked"]
        report["occurrences_checked"] = (
            report["heavy_occurrences_checked"] + stats["light_occurrences_checked"]
        )
        report["light_fire_to_effect_seconds"] = {
            **{q: v for q, v in zip(("p50", "p90", "p99", "p999"), quantiles or [], strict=False)},
            "max": worst,
        }
        report["light_by_second"] = [
            (round(fire - wall0, 1), n, p50, p99, top) for fire, n, p50, p99, top in by_second
        ]
        report["effects_per_second"] = [(round(at - wall0, 1), n) for at, n in effects]
        return report
