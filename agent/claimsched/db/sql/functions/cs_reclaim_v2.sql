-- Take over runs that want an owner: manual/backfill requests (pending) whose fire time has
-- come, orphans (first: they are runs in progress), and failed runs whose retry is due.
-- attempt + 1 is the new fencing token, and a new lease_token (returned to this claimer only)
-- fences out the previous owner even if it had the same agent id. A Forbid job starts at most
-- one run, and none while another of its runs is in progress (read by forbid_in_progress(),
-- after its lock); an orphan yields only to a running run or an older orphan. The p_capacity
-- runs picked are ones that may start: a Forbid job's runs that must wait are passed over.
-- Only the jobs of the caller's scope (cs_agent_scope()) are considered. p_jobs NULL: the jobs
-- of the agents row of p_agent_id (housekeeping keeps the list there, so a reclaim need not
-- send it).
-- The attempt a taken run had (orphaned, fenced out, or failed and retried) is kept in
-- job_attempts, with its owner, times and error: the occurrence's history.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_reclaim_v2(p_agent_id text, p_jobs text[], p_capacity integer)
RETURNS TABLE (id bigint, job_name text, fire_time timestamptz, kind text, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               orphan_count integer,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, db_now timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := cs_agent_scope();
BEGIN
IF p_jobs IS NULL THEN  -- the agent's job list as housekeeping keeps it in its agents row
    SELECT a.handlers INTO p_jobs FROM agents a WHERE a.agent_id = p_agent_id;
END IF;
IF v_scope IS NOT NULL THEN
    p_jobs := ARRAY(SELECT j.name FROM unnest(p_jobs) AS j(name) WHERE j.name LIKE ANY (v_scope));
END IF;
RETURN QUERY
WITH picked AS (
    SELECT r.id, r.job_name, r.fire_time, r.status, r.attempt, r.claimed_by, r.started_at,
           r.finished_at, r.lease_until, r.error
    FROM job_runs r
    WHERE r.job_name = ANY(p_jobs)
      AND run_wants_owner(r.status, r.fire_time, r.retry_at)
      -- A Forbid job's run that must wait (another of its runs is in progress or comes first)
      -- takes no place under the LIMIT, or a Forbid backlog would hold back every other job's
      -- waiting runs. In the snapshot only: `forbid` and `busy` below decide, after the lock.
      AND NOT (EXISTS (SELECT 1 FROM job_schedule s
                       WHERE s.job_name = r.job_name AND s.concurrency_policy = 'Forbid'
                       OFFSET 0)
               AND EXISTS (SELECT 1 FROM job_runs o
                           WHERE o.job_name = r.job_name AND o.id <> r.id
                             AND (o.status = 'running'
                                  OR (run_wants_owner(o.status, o.fire_time, o.retry_at)
                                      AND (o.status <> 'orphaned', o.fire_time)
                                          < (r.status <> 'orphaned', r.fire_time)))))
    ORDER BY r.status = 'orphaned' DESC, r.fire_time
    LIMIT p_capacity
    FOR UPDATE OF r SKIP LOCKED
),
forbid AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.job_name
                                   ORDER BY p.status = 'orphaned' DESC, p.fire_time) AS nth
    FROM picked p
    WHERE EXISTS (SELECT 1 FROM job_schedule s
                  WHERE s.job_name = p.job_name AND s.concurrency_policy = 'Forbid' OFFSET 0)
),
busy AS (
    SELECT * FROM forbid_in_progress(ARRAY(SELECT DISTINCT f.job_name FROM forbid f))
),
taken AS (
    SELECT p.id, p.fire_time FROM picked p
    WHERE NOT EXISTS (
        SELECT 1 FROM forbid f
        WHERE f.id = p.id AND f.fire_time = p.fire_time
          AND (f.nth > 1
               OR EXISTS (SELECT 1 FROM busy b
                          WHERE b.job_name = f.job_name AND b.id <> f.id
                            AND (b.status = 'running' OR f.status <> 'orphaned'
                                 OR b.fire_time < f.fire_time))))
),
superseded AS (  -- the attempt each taken run had before: its history
    INSERT INTO job_attempts (job_name, fire_time, attempt, run_id, claimed_by, started_at,
                              ended_at, outcome, error)
    SELECT p.job_name, p.fire_time, p.attempt, p.id, p.claimed_by, p.started_at,
           coalesce(p.finished_at, p.lease_until),
           CASE WHEN p.status = 'failed' THEN 'failed'
                WHEN p.error LIKE 'fenced out %' THEN 'fenced_out' ELSE 'orphaned' END,
           p.error
    FROM picked p JOIN taken t ON t.id = p.id AND t.fire_time = p.fire_time
    WHERE p.status <> 'pending'
    ON CONFLICT (job_name, fire_time, attempt) DO NOTHING
)
UPDATE job_runs r
SET status = 'running', attempt = r.attempt + 1, claimed_by = p_agent_id,
    lease_token = gen_random_uuid(), lease_until = now() + make_interval(secs => s.lease_seconds), started_at = now(),
    finished_at = NULL, retry_at = NULL
FROM taken, job_schedule s
WHERE r.id = taken.id AND r.fire_time = taken.fire_time AND s.job_name = r.job_name
RETURNING r.id, r.job_name, r.fire_time, r.kind, r.attempt, r.lease_token, r.lease_until,
          r.started_at, r.orphan_count, s.lease_seconds, s.heartbeat_seconds, s.max_attempts,
          s.retry_on_failure, now();
END
$$;
