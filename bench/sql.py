"""The harness's own statements (run as the `postgres` superuser, never as the agents' role).

Agents connect as AGENT_ROLE, the operator's status refresh as OPERATOR_ROLE: pg_stat_statements
keeps statistics per role, so the harness's queries never count as the agents' cost.
"""

AGENT_ROLE = "bench_agent"
OPERATOR_ROLE = "bench_operator"
DATABASE = "bench"
PGBENCH_DATABASE = "bench_pgbench"

SETUP_SERVER = [
    "CREATE ROLE bench_agent LOGIN",
    "CREATE ROLE bench_operator LOGIN IN ROLE bench_agent",
    "CREATE DATABASE bench OWNER bench_agent",
    "CREATE DATABASE bench_pgbench OWNER bench_agent",
]
SETUP_DATABASE = "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

# Statistics of one role in one database; `toplevel` separates statements a client sent from
# those run inside functions and triggers (pg_stat_statements.track = all).
STATEMENT_STATS = """
SELECT s.queryid, s.toplevel, s.calls, s.total_exec_time, s.rows, s.query, s.total_plan_time
FROM pg_stat_statements s
JOIN pg_roles r ON r.oid = s.userid
JOIN pg_database d ON d.oid = s.dbid
WHERE r.rolname = %(role)s AND d.datname = %(database)s
"""

SERVER_VERSION = "SELECT current_setting('server_version')"
STANDBYS = "SELECT application_name, state, sync_state FROM pg_stat_replication ORDER BY 1"

# Schedules the benchmarks run: J rows `<prefix>00000`.. with one schedule expression.
INSERT_SCHEDULES = """
INSERT INTO claimsched.job_schedule (job_name, schedule, enabled, concurrency_policy,
                                     catch_up_policy, source)
SELECT %(prefix)s || lpad(g::text, 5, '0'), %(schedule)s, %(enabled)s, %(policy)s,
       %(catch_up)s, 'cli'
FROM generate_series(0, %(count)s - 1) AS g
"""
SET_SCHEDULE = "UPDATE claimsched.job_schedule SET schedule = %(schedule)s"
ENABLE_ALL = "UPDATE claimsched.job_schedule SET enabled = true"

LIVE_AGENTS = """
SELECT count(*) FROM claimsched.agents
WHERE agent_id = ANY(%(ids)s) AND stopped_at IS NULL AND last_seen >= %(since)s
"""

# Claims as the database recorded them: started_at is the database's now() at claim time.
RUNS_BETWEEN = """
SELECT job_name, extract(epoch FROM fire_time)::float8, status, claimed_by,
       extract(epoch FROM started_at)::float8, attempt
FROM claimsched.job_runs
WHERE fire_time >= to_timestamp(%(start)s) AND fire_time < to_timestamp(%(end)s)
"""
# Scenario f: how far a backlog of one job is, and who took its runs.
RUNS_DONE = "SELECT count(*) FROM claimsched.job_runs WHERE job_name = %(job)s AND status = 'done'"
RUN_OWNERS = """
SELECT claimed_by, count(*) FROM claimsched.job_runs WHERE job_name = %(job)s GROUP BY 1
"""
RUNS_STARTED_BETWEEN = """
SELECT status, count(*) FROM claimsched.job_runs
WHERE started_at >= to_timestamp(%(start)s) AND started_at < to_timestamp(%(end)s)
GROUP BY status
"""

# Scenario d: a history for many operator-managed schedules.
D_SCHEDULES = """
INSERT INTO claimsched.job_schedule (job_name, schedule, enabled, source, owner)
SELECT 'd' || lpad(g::text, 5, '0'),
       (ARRAY['0 * * * *', '*/30 * * * *', '15 3 * * *', '@every 1h'])[1 + g %% 4],
       true, 'operator', 'bench/d' || lpad(g::text, 5, '0')
FROM generate_series(0, %(count)s - 1) AS g
"""
D_ACTIVE_SINCE = (
    "UPDATE claimsched.job_schedule SET active_since = now() - make_interval(days => %(days)s)"
)
# Runs of the last day, aligned on each schedule; every 50th occurrence is missing (missed
# runs to count), every 20th failed, every 200th orphaned, the newest of each job running.
D_RUNS = """
INSERT INTO claimsched.job_runs (job_name, fire_time, status, claimed_by, lease_until, attempt,
                                 started_at, finished_at, error, orphan_count)
SELECT s.job_name, f.t,
       CASE WHEN f.n = 0 THEN 'running' WHEN f.n %% 200 = 7 THEN 'orphaned'
            WHEN f.n %% 20 = 3 THEN 'failed' ELSE 'done' END,
       'bench-agent-1', f.t + interval '120 s', 1, f.t, f.t + interval '1 s',
       CASE WHEN f.n %% 20 = 3 THEN 'RuntimeError: bench' END,
       CASE WHEN f.n %% 200 = 7 THEN 1 ELSE 0 END
FROM claimsched.job_schedule s
CROSS JOIN LATERAL (
    SELECT t, (row_number() OVER (ORDER BY t DESC) - 1)::int AS n
    FROM generate_series(
        date_trunc('hour', now()) - interval '1 day'
            + CASE WHEN s.schedule = '15 3 * * *' THEN interval '15 min' ELSE interval '0' END,
        now(),
        CASE WHEN s.schedule = '*/30 * * * *' THEN interval '30 min' ELSE interval '1 hour' END
    ) AS t
    WHERE s.schedule <> '15 3 * * *' OR extract(hour FROM t AT TIME ZONE 'UTC') = 3
) AS f
WHERE s.job_name LIKE %(pattern)s AND f.n %% 50 <> 49
"""
D_LIVE_AGENTS = """
INSERT INTO claimsched.agents (agent_id, hostname, handlers, version, ttl_seconds)
SELECT 'bench-agent-' || a, 'bench', array_agg(s.job_name), 'bench', 86400
FROM claimsched.job_schedule s, generate_series(1, 3) AS a
GROUP BY a
"""

# Scenario e: `count` jobs <prefix>00000..; the first `daily` at one minute of the day each
# (spread over the day), the rest `@every 1s..60s` (the k-th of them every 1 + k % 60 s).
E_SCHEDULES = """
INSERT INTO claimsched.job_schedule (job_name, schedule, source)
SELECT %(prefix)s || lpad(g::text, 5, '0'),
       CASE WHEN g < %(daily)s THEN (g %% 60) || ' ' || (g / 60 %% 24) || ' * * *'
            ELSE '@every ' || (1 + (g - %(daily)s) %% 60) || 's' END,
       'cli'
FROM generate_series(0, %(count)s - 1) AS g
"""
CLAIMING_AGENTS = "SELECT count(DISTINCT claimed_by) FROM claimsched.job_runs"
E_MOVE_ONE = """
UPDATE claimsched.job_schedule SET schedule = %(minute)s || ' ' || split_part(schedule, ' ', 2)
                                              || ' * * *'
WHERE job_name = %(job)s
"""
