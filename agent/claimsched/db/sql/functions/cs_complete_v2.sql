-- Record the outcome of finished runs (batched), fenced by owner, attempt (the fencing
-- token) and lease token. The lease need not be alive: a handler that finished while the
-- database was away longer than its lease is recorded if nobody took the run over meanwhile
-- (still running, or orphaned by the reaper but not reclaimed: a reclaim sets a new owner and
-- attempt). A run fenced out for good (failed: max_runtime, Replace, attempts exhausted) stays
-- as it is. A failure is retried later when its job allows it and attempts remain. 'done' and
-- 'failed' are the job's outcomes: a finished run is never reopened, nor set back to pending.
-- 'fenced_out' is not an outcome: the handler ended because this agent lost the lease, so the
-- run goes back for the next attempt (orphaned, claimable at once: the agents are told), its
-- error saying why, or fails for good when that was its last attempt (max_attempts, as the
-- reaper does). An attempt superseded so is kept in job_attempts by the reclaim that follows.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_complete_v2(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[], p_max_attempts integer[],
    p_backoffs double precision[])
RETURNS TABLE (id bigint, retry_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
SET status = CASE WHEN c.status <> 'fenced_out' THEN c.status
                  WHEN r.attempt >= c.max_attempts THEN 'failed' ELSE 'orphaned' END,
    finished_at = CASE WHEN c.status <> 'fenced_out' OR r.attempt >= c.max_attempts
                       THEN now() END,
    error = CASE WHEN c.status <> 'fenced_out' THEN c.error
                 ELSE 'fenced out (claimed by ' || r.claimed_by || ', attempt ' || r.attempt
                      || '): ' || coalesce(c.error, 'the lease was lost')
                      || CASE WHEN r.attempt >= c.max_attempts
                              THEN '; attempts exhausted' ELSE '' END END,
    lease_until = least(r.lease_until, now()),
    orphan_count = r.orphan_count
                   + CASE WHEN c.status = 'fenced_out' AND r.status = 'running' THEN 1 ELSE 0 END,
    retry_at = CASE WHEN c.status = 'failed' AND c.retry AND r.attempt < c.max_attempts
                    THEN now() + make_interval(secs => c.backoff) END
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_statuses, p_errors, p_retries,
            p_max_attempts, p_backoffs)
     AS c(id, fire_time, attempt, lease_token, status, error, retry, max_attempts, backoff)
WHERE r.id = c.id AND r.fire_time = c.fire_time AND r.attempt = c.attempt
  AND r.lease_token = c.lease_token
  AND r.claimed_by = p_agent_id AND r.status IN ('running', 'orphaned')
  AND c.status IN ('done', 'failed', 'fenced_out')
RETURNING r.id, r.retry_at;
IF 'fenced_out' = ANY (p_statuses) THEN  -- runs given back want an owner now
    PERFORM pg_notify('claimsched_runs', cs_schema_name());
END IF;
END
$$;
