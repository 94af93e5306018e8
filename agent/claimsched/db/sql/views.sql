-- The read-only web view's statements (claimsched web): SELECT only, a fixed number per page
-- whatever the number of schedules. Each job's recent runs come from the backward scan of
-- UNIQUE (job_name, fire_time), LIMIT per job, never from a scan of the whole history.

-- name: web_schedules
-- Every schedule (or only %(job_name)s) with its newest %(recent)s runs as parallel arrays
-- (newest first; run_owners: the owner of each run's current or last attempt;
-- run_earlier_owners: a JSON array per run of the owners of the attempts a later one
-- superseded, oldest first), its latest success, the newest occurrence that has a
-- run (any run but a manual one: claimsched.deadlines tells from it whether the job is late,
-- as the operator's `latest_occurrence`), the live agents that handle it, and the database
-- clock. Only a run past its first attempt has superseded attempts (cs_reclaim_v2 keeps them):
-- job_attempts is probed by its primary key for those runs alone.
SELECT s.job_name, s.schedule, s.time_zone, s.enabled, s.source, s.owner, s.active_since,
       s.updated_at, s.lease_seconds, s.catch_up_window_seconds, s.catch_up_policy,
       s.concurrency_policy, s.max_attempts, s.suspend_reason, s.suspend_until,
       coalesce(recent.ids, '{}') AS run_ids,
       coalesce(recent.fire_times, '{}') AS run_fire_times,
       coalesce(recent.kinds, '{}') AS run_kinds,
       coalesce(recent.statuses, '{}') AS run_statuses,
       coalesce(recent.attempts, '{}') AS run_attempts,
       coalesce(recent.orphan_counts, '{}') AS run_orphan_counts,
       coalesce(recent.owners, '{}') AS run_owners,
       coalesce(recent.earlier_owners, '[]') AS run_earlier_owners,
       success.fire_time AS last_success, success.finished_at AS last_success_finished,
       occurred.fire_time AS latest_occurrence,
       coalesce(live.agents, 0) AS live_agents,
       now() AS db_now
FROM job_schedule s
LEFT JOIN LATERAL (
    SELECT array_agg(r.id ORDER BY r.fire_time DESC) AS ids,
           array_agg(r.fire_time ORDER BY r.fire_time DESC) AS fire_times,
           array_agg(r.kind ORDER BY r.fire_time DESC) AS kinds,
           array_agg(r.status ORDER BY r.fire_time DESC) AS statuses,
           array_agg(r.attempt ORDER BY r.fire_time DESC) AS attempts,
           array_agg(r.orphan_count ORDER BY r.fire_time DESC) AS orphan_counts,
           array_agg(r.claimed_by ORDER BY r.fire_time DESC) AS owners,
           jsonb_agg(CASE WHEN r.attempt > 1 THEN (
                         SELECT coalesce(jsonb_agg(a.claimed_by ORDER BY a.attempt), '[]')
                         FROM job_attempts a
                         WHERE a.job_name = r.job_name AND a.fire_time = r.fire_time)
                     ELSE '[]' END
                     ORDER BY r.fire_time DESC) AS earlier_owners
    FROM (
        SELECT r.id, r.job_name, r.fire_time, r.kind, r.status, r.attempt, r.orphan_count,
               r.claimed_by
        FROM job_runs r
        WHERE r.job_name = s.job_name
        ORDER BY r.fire_time DESC
        LIMIT %(recent)s
    ) r
) recent ON true
LEFT JOIN LATERAL (
    SELECT r.fire_time, r.finished_at FROM job_runs r
    WHERE r.job_name = s.job_name AND r.status = 'done'
    ORDER BY r.fire_time DESC
    LIMIT 1
) success ON true
LEFT JOIN LATERAL (
    SELECT r.fire_time FROM job_runs r
    WHERE r.job_name = s.job_name AND r.kind <> 'manual'
    ORDER BY r.fire_time DESC
    LIMIT 1
) occurred ON true
LEFT JOIN (
    SELECT h.job_name, count(DISTINCT a.agent_id) AS agents
    FROM agents a, unnest(a.handlers) AS h(job_name)
    WHERE agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
    GROUP BY h.job_name
) live ON live.job_name = s.job_name
WHERE %(job_name)s::text IS NULL OR s.job_name = %(job_name)s
ORDER BY s.job_name

-- name: web_schedule_runs
-- One job's runs with a fire time after %(since)s, newest first, at most %(limit)s, each with
-- the owners of the attempts a later one superseded (oldest first; as web_schedules).
SELECT r.id, r.fire_time, r.kind, r.status, r.attempt, r.orphan_count, r.claimed_by,
       r.started_at, r.finished_at, r.error,
       CASE WHEN r.attempt > 1 THEN ARRAY(
                SELECT a.claimed_by FROM job_attempts a
                WHERE a.job_name = r.job_name AND a.fire_time = r.fire_time
                ORDER BY a.attempt)
            ELSE '{}' END AS earlier_owners
FROM job_runs r
WHERE r.job_name = %(job_name)s AND r.fire_time > %(since)s
ORDER BY r.fire_time DESC
LIMIT %(limit)s

-- name: web_run
-- One run by id with its schedule's attempt budget, the attempts a later one superseded
-- (job_attempts, oldest first), its first %(effects)s effect receipts (the attempt that
-- recorded each) and how many it has in all, and the database clock.
SELECT r.id, r.job_name, r.fire_time, r.kind, r.status, r.claimed_by, r.lease_until,
       r.attempt, r.started_at, r.finished_at, r.error, r.orphan_count, r.retry_at,
       s.max_attempts, s.schedule, s.time_zone,
       coalesce(tried.numbers, '{}') AS attempt_numbers,
       coalesce(tried.owners, '{}') AS attempt_owners,
       coalesce(tried.started, '{}') AS attempt_started_at,
       coalesce(tried.ended, '{}') AS attempt_ended_at,
       coalesce(tried.outcomes, '{}') AS attempt_outcomes,
       coalesce(tried.errors, '{}') AS attempt_errors,
       coalesce(receipts.entities, '{}') AS effect_entities,
       coalesce(receipts.attempts, '{}') AS effect_attempts,
       coalesce(receipts.recorded, '{}') AS effect_recorded_at,
       coalesce(total.effects, 0) AS effect_count,
       now() AS db_now
FROM job_runs r
LEFT JOIN job_schedule s ON s.job_name = r.job_name
LEFT JOIN LATERAL (
    SELECT array_agg(a.attempt ORDER BY a.attempt) AS numbers,
           array_agg(a.claimed_by ORDER BY a.attempt) AS owners,
           array_agg(a.started_at ORDER BY a.attempt) AS started,
           array_agg(a.ended_at ORDER BY a.attempt) AS ended,
           array_agg(a.outcome ORDER BY a.attempt) AS outcomes,
           array_agg(a.error ORDER BY a.attempt) AS errors
    FROM job_attempts a WHERE a.job_name = r.job_name AND a.fire_time = r.fire_time
) tried ON true
LEFT JOIN LATERAL (
    SELECT array_agg(e.entity ORDER BY e.recorded_at, e.entity) AS entities,
           array_agg(e.attempt ORDER BY e.recorded_at, e.entity) AS attempts,
           array_agg(e.recorded_at ORDER BY e.recorded_at, e.entity) AS recorded
    FROM (
        SELECT e.entity, e.attempt, e.recorded_at FROM job_effects e
        WHERE e.job_name = r.job_name AND e.fire_time = r.fire_time AND e.run_id = r.id
        ORDER BY e.recorded_at, e.entity
        LIMIT %(effects)s
    ) e
) receipts ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS effects FROM job_effects e
    WHERE e.job_name = r.job_name AND e.fire_time = r.fire_time AND e.run_id = r.id
) total ON true
WHERE r.id = %(run_id)s

-- name: web_agents
-- Agents seen recently, newest first: alive while not stopped and seen within their own
-- time-to-live; and the database clock.
SELECT agent_id, hostname, pod, namespace, handlers, version, started_at, last_seen,
       stopped_at, ttl_seconds,
       agent_alive(stopped_at, last_seen, ttl_seconds) AS alive,
       now() AS db_now
FROM agents
ORDER BY last_seen DESC, agent_id
