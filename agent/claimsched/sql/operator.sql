-- claimsched: the statements the Kubernetes operator sends (claimsched_operator).
-- Same format as queries.sql: `-- name: x`, a description line, then the body.

-- name: operator_release_schedule
-- A ClaimSchedule was deleted: disable its row and let go of it; runs and effects stay. The
-- row is released (source 'operator', no owner): the next declaration of the job (a code
-- declaration re-applied by its agents on the change's notification, the CLI, a ClaimSchedule)
-- takes it. By owner: a ClaimSchedule owns at most one row per database, its jobName being
-- immutable, so a delete needs no memory of which job it was.
UPDATE job_schedule SET enabled = false, owner = NULL
WHERE source = 'operator' AND owner = %(owner)s
RETURNING job_name

-- name: operator_database
-- Which database this is: the cluster's system identifier and the database's name (the
-- operator records a hash of them, with the schema, where a ClaimSchedule's row is written).
SELECT i.system_identifier, current_database() FROM database_identity() i

-- name: operator_status
-- Everything the status of every given job needs, in one statement: the schedule's windows
-- for missed-run counting (`day_start`/`history_start` to `settled_end`, by fire time), run
-- counters, the latest run, the latest success, the live agents that handle the job, and how
-- durable a commit is on this database (the same on every row).
-- Occurrences at or before active_since never run; a disabled row stops counting at its
-- last change; occurrences younger than catch-up window + lease may still be claimed.
-- An occurrence happened when a scheduled or backfilled run holds its fire time (one row per
-- fire time); a manual run is at the instant of its trigger, which is no occurrence.
-- `latest_occurrence`: the newest occurrence with a run (for a late start). The streak: how many
-- of the latest finished runs (done or failed, at most 100) in a row ended as the latest did:
-- those newer than the latest run that ended the other way.
-- Each job's figures come from its own index range (job_name, fire_time), not a join of every
-- job's runs: the counters read the job's runs since its window began (`window_start`; and its
-- running or orphaned ones before), the streak only its own runs. The latest run, success and
-- failure are the newest of that range when it has one (most jobs: no probe of every
-- partition); only a job without one in its window looks further back, one index entry each
-- (the failure in job_runs_failed), and the latest run is then read by its key.
-- `jobs` is MATERIALIZED: each job's window bounds are computed once, not again for every run
-- the counters read (inlined, every FILTER recomputed them from now()).
WITH jobs AS MATERIALIZED (
    SELECT s.job_name, s.enabled, s.active_since, s.suspend_until, d.day_ago,
           greatest(s.active_since, s.suspend_until, d.day_ago) AS day_start,
           greatest(s.active_since, s.suspend_until, d.retained) AS history_start,
           least(greatest(s.active_since, s.suspend_until, d.retained), d.day_ago) AS window_start,
           CASE WHEN s.enabled
                THEN now() - make_interval(secs => s.catch_up_window_seconds + s.lease_seconds)
                ELSE least(s.updated_at,
                           now() - make_interval(secs => s.catch_up_window_seconds
                                                         + s.lease_seconds))
           END AS settled_end
    FROM job_schedule s,
         (SELECT now() - interval '24 hours' AS day_ago,
                 now() - make_interval(days => %(retention_days)s) AS retained) d
    WHERE s.job_name = ANY (%(jobs)s::text[])
)
SELECT j.job_name, j.enabled, j.active_since, j.suspend_until, j.day_start, j.history_start,
       j.settled_end,
       coalesce(c.active_runs, 0) AS active_runs,
       coalesce(c.orphaned_current, 0) AS orphaned_current,
       coalesce(c.orphaned_day, 0) AS orphaned_day,
       coalesce(c.failed_day, 0) AS failed_day,
       coalesce(c.exhausted_day, 0) AS exhausted_day,
       coalesce(c.seen_day, 0) AS seen_day,
       coalesce(c.seen_history, 0) AS seen_history,
       c.latest_seen, c.latest_occurrence,
       CASE WHEN latest.failure_time > coalesce(latest.success_time, '-infinity')
            THEN streak.runs ELSE 0 END AS consecutive_failures,
       CASE WHEN latest.success_time > coalesce(latest.failure_time, '-infinity')
            THEN streak.runs ELSE 0 END AS consecutive_successes,
       last.fire_time AS last_fire_time, last.status AS last_status, last.attempt AS last_attempt,
       last.claimed_by AS last_claimed_by, last.started_at AS last_started_at,
       last.finished_at AS last_finished_at, last.error AS last_error,
       latest.success_time AS last_successful_time,
       coalesce(live.agents, 0) AS live_agents,
       coalesce(live.tzdata, '{}') AS agent_tzdata,
       (SELECT durability FROM database_identity()) AS durability,
       now() AS db_now
FROM jobs j
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE r.status = 'running') AS active_runs,
           count(*) FILTER (WHERE r.status = 'orphaned') AS orphaned_current,
           sum(r.orphan_count) FILTER (WHERE r.fire_time > j.day_ago) AS orphaned_day,
           count(*) FILTER (WHERE r.status = 'failed' AND r.fire_time > j.day_ago) AS failed_day,
           count(*) FILTER (WHERE r.status = 'failed' AND r.fire_time > j.day_ago
                              AND r.error LIKE '%%attempts exhausted') AS exhausted_day,
           count(*) FILTER (WHERE r.kind <> 'manual' AND r.fire_time > j.day_start
                              AND r.fire_time <= j.settled_end) AS seen_day,
           count(*) FILTER (WHERE r.kind <> 'manual' AND r.fire_time > j.history_start
                              AND r.fire_time <= j.settled_end) AS seen_history,
           max(r.fire_time) FILTER (WHERE r.kind <> 'manual' AND r.fire_time > j.history_start
                                      AND r.fire_time <= j.settled_end) AS latest_seen,
           max(r.fire_time) FILTER (WHERE r.kind <> 'manual') AS latest_occurrence,
           max(r.fire_time) FILTER (WHERE r.status <> 'pending'
                                      AND r.fire_time > j.window_start) AS recent_last,
           max(r.fire_time) FILTER (WHERE r.status = 'done'
                                      AND r.fire_time > j.window_start) AS recent_success,
           max(r.fire_time) FILTER (WHERE r.status = 'failed'
                                      AND r.fire_time > j.window_start) AS recent_failure
    FROM (
        SELECT r.status, r.kind, r.fire_time, r.orphan_count, r.error FROM job_runs r
        WHERE r.job_name = j.job_name AND r.fire_time > j.window_start
        UNION ALL
        SELECT r.status, r.kind, r.fire_time, r.orphan_count, r.error FROM job_runs r
        WHERE r.job_name = j.job_name AND r.status IN ('running', 'orphaned')
          AND r.fire_time <= j.window_start
    ) r
) c ON true
LEFT JOIN (
    SELECT h.job_name, count(DISTINCT a.agent_id) AS agents,
           array_agg(DISTINCT a.tzdata ORDER BY a.tzdata)
               FILTER (WHERE a.tzdata IS NOT NULL) AS tzdata
    FROM agents a, unnest(a.handlers) AS h(job_name)
    WHERE a.stopped_at IS NULL
      AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()
    GROUP BY h.job_name
) live ON live.job_name = j.job_name
LEFT JOIN LATERAL (
    SELECT coalesce(c.recent_last, (
               SELECT r.fire_time FROM job_runs r
               WHERE r.job_name = j.job_name AND r.status <> 'pending'
               ORDER BY r.fire_time DESC LIMIT 1)) AS last_time,
           coalesce(c.recent_success, (
               SELECT r.fire_time FROM job_runs r
               WHERE r.job_name = j.job_name AND r.status = 'done'
               ORDER BY r.fire_time DESC LIMIT 1)) AS success_time,
           coalesce(c.recent_failure, (
               SELECT r.fire_time FROM job_runs r
               WHERE r.job_name = j.job_name AND r.status = 'failed'
               ORDER BY r.fire_time DESC LIMIT 1)) AS failure_time
) latest ON true
LEFT JOIN LATERAL (
    SELECT r.fire_time, r.status, r.attempt, r.claimed_by, r.started_at, r.finished_at, r.error
    FROM job_runs r
    WHERE r.job_name = j.job_name AND r.fire_time = latest.last_time
) last ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS runs
    FROM (
        SELECT FROM job_runs r
        WHERE r.job_name = j.job_name AND r.status IN ('done', 'failed')
          AND r.fire_time > CASE WHEN latest.success_time IS NULL OR latest.failure_time IS NULL
                                 THEN '-infinity'
                                 ELSE least(latest.success_time, latest.failure_time) END
        LIMIT 100
    ) newer
) streak ON true

-- name: operator_trigger_run
-- A claimsched.io/trigger value asks for one manual run, once per trigger key.
-- The statement and what it decides: sql/functions.sql's cs_trigger_run.
SELECT * FROM cs_trigger_run(%(job_name)s, %(trigger_key)s)
