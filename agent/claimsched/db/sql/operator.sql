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
-- Settled history: the occurrences of `(history_start, settled_to]` (older than a day and than
-- an hour before `settled_end`) change only by a backfill or retention, which move
-- history_epoch. The caller passes, per job, the range it counted before (`known_from`,
-- `known_to`; NULL: none) and the epoch it counted at: when the epoch is the same and the new
-- range only slid forward, `settled_seen`/`settled_latest` are the occurrences that entered it
-- and `settled_dropped` those that left (`settled_incremental`); otherwise the whole range.
-- `seen_recent`/`latest_recent`: the occurrences after `settled_to`, to `settled_end`.
-- Each job's figures come from its own index range (job_name, fire_time), not a join of every
-- job's runs: the counters read the job's runs since `scan_from` (`settled_to`, or the day's
-- start when earlier; and its running or orphaned runs before), the streak only its own runs.
-- The latest run, success and failure are the newest of that range when it has one (most
-- jobs: no probe of every partition); only a job without one there looks further back, one
-- index entry each (the failure in job_runs_failed), and the latest run is then read by its key.
-- `jobs` is MATERIALIZED: each job's window bounds are computed once, not again for every run
-- the counters read (inlined, every FILTER recomputed them from now()).
WITH jobs AS MATERIALIZED (
    SELECT w.*, least(w.settled_to, w.day_ago) AS scan_from,
           w.known_to IS NOT NULL AND w.history_epoch = %(known_epoch)s::bigint
               AND w.known_from <= w.history_start AND w.history_start <= w.known_to
               AND w.known_to <= w.settled_to AS incremental
    FROM (
        SELECT b.*,
               greatest(b.history_start,
                        least(b.day_ago, b.settled_end - interval '1 hour')) AS settled_to
        FROM (
            SELECT s.job_name, s.enabled, s.active_since, s.suspend_until, d.day_ago,
                   k.known_from, k.known_to, d.history_epoch,
                   greatest(s.active_since, s.suspend_until, d.day_ago) AS day_start,
                   greatest(s.active_since, s.suspend_until, d.retained) AS history_start,
                   least(greatest(s.active_since, s.suspend_until, d.retained), d.day_ago)
                       AS window_start,
                   CASE WHEN s.enabled
                        THEN now() - make_interval(secs => s.catch_up_window_seconds
                                                           + s.lease_seconds)
                        ELSE least(s.updated_at,
                                   now() - make_interval(secs => s.catch_up_window_seconds
                                                                 + s.lease_seconds))
                   END AS settled_end
            FROM unnest(%(jobs)s::text[], %(known_from)s::timestamptz[],
                        %(known_to)s::timestamptz[]) AS k(job_name, known_from, known_to)
            JOIN job_schedule s ON s.job_name = k.job_name,
                 (SELECT now() - interval '24 hours' AS day_ago,
                         now() - make_interval(days => %(retention_days)s) AS retained,
                         (SELECT epoch FROM history_epoch) AS history_epoch) d
        ) b
    ) w
)
SELECT j.job_name, j.enabled, j.active_since, j.suspend_until, j.day_start, j.history_start,
       j.settled_end, j.settled_to, j.incremental AS settled_incremental, j.history_epoch,
       coalesce(c.active_runs, 0) AS active_runs,
       coalesce(c.orphaned_current, 0) AS orphaned_current,
       coalesce(c.orphaned_day, 0) AS orphaned_day,
       coalesce(c.failed_day, 0) AS failed_day,
       coalesce(c.exhausted_day, 0) AS exhausted_day,
       coalesce(c.seen_day, 0) AS seen_day,
       coalesce(c.seen_recent, 0) AS seen_recent, c.latest_recent,
       settled.seen AS settled_seen, settled.latest AS settled_latest,
       coalesce(dropped.seen, 0) AS settled_dropped,
       CASE WHEN c.latest_occurrence > j.scan_from THEN c.latest_occurrence
            ELSE greatest(c.latest_occurrence, (
                SELECT r.fire_time FROM job_runs r
                WHERE r.job_name = j.job_name AND r.kind <> 'manual'
                  AND r.fire_time > j.window_start AND r.fire_time <= j.scan_from
                ORDER BY r.fire_time DESC LIMIT 1))
       END AS latest_occurrence,
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
           count(*) FILTER (WHERE r.kind <> 'manual' AND r.fire_time > j.settled_to
                              AND r.fire_time <= j.settled_end) AS seen_recent,
           max(r.fire_time) FILTER (WHERE r.kind <> 'manual' AND r.fire_time > j.settled_to
                                      AND r.fire_time <= j.settled_end) AS latest_recent,
           max(r.fire_time) FILTER (WHERE r.kind <> 'manual') AS latest_occurrence,
           max(r.fire_time) FILTER (WHERE r.status <> 'pending'
                                      AND r.fire_time > j.scan_from) AS recent_last,
           max(r.fire_time) FILTER (WHERE r.status = 'done'
                                      AND r.fire_time > j.scan_from) AS recent_success,
           max(r.fire_time) FILTER (WHERE r.status = 'failed'
                                      AND r.fire_time > j.scan_from) AS recent_failure
    FROM (
        SELECT r.status, r.kind, r.fire_time, r.orphan_count, r.error FROM job_runs r
        WHERE r.job_name = j.job_name AND r.fire_time > j.scan_from
        UNION ALL  -- the older running and orphaned runs, from their partial indexes
        SELECT r.status, r.kind, r.fire_time, r.orphan_count, r.error FROM job_runs r
        WHERE r.job_name = j.job_name AND r.status = 'running' AND r.fire_time <= j.scan_from
        UNION ALL
        SELECT r.status, r.kind, r.fire_time, r.orphan_count, r.error FROM job_runs r
        WHERE r.job_name = j.job_name AND r.status = 'orphaned' AND r.fire_time <= j.scan_from
    ) r
) c ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS seen, max(r.fire_time) AS latest
    FROM job_runs r
    WHERE r.job_name = j.job_name AND r.kind <> 'manual' AND r.fire_time <= j.settled_to
      AND r.fire_time > CASE WHEN j.incremental THEN j.known_to ELSE j.history_start END
) settled ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS seen
    FROM job_runs r
    WHERE j.incremental AND r.job_name = j.job_name AND r.kind <> 'manual'
      AND r.fire_time > j.known_from AND r.fire_time <= j.history_start
) dropped ON true
LEFT JOIN (
    SELECT h.job_name, count(DISTINCT a.agent_id) AS agents,
           array_agg(DISTINCT a.tzdata ORDER BY a.tzdata)
               FILTER (WHERE a.tzdata IS NOT NULL) AS tzdata
    FROM agents a, unnest(a.handlers) AS h(job_name)
    WHERE agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
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
LEFT JOIN LATERAL (  -- LIMIT: one index entry per job, never a hash of every run
    SELECT r.fire_time, r.status, r.attempt, r.claimed_by, r.started_at, r.finished_at, r.error
    FROM job_runs r
    WHERE r.job_name = j.job_name AND r.fire_time = latest.last_time
    LIMIT 1
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

