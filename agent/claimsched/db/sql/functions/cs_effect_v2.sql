-- Record a side effect's receipt if this run still owns its occurrence. `owned` false means
-- the lease was lost (fenced); `inserted` false means the receipt already existed.
-- The fence row stays locked FOR KEY SHARE until the receipt's transaction ends: no reclaim
-- (attempt + 1, a key update) can pass it meanwhile, so the fence holds at commit. The
-- receipt is for the run's own job: a lease of one job never writes another job's receipts.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_effect_v2(
    p_run_id bigint, p_fire_time timestamptz, p_agent_id text, p_attempt integer,
    p_lease_token uuid, p_entity text, p_job_name text)
RETURNS TABLE (owned boolean, inserted boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH fence AS (
    SELECT r.id, r.attempt FROM job_runs r
    WHERE r.id = p_run_id AND r.fire_time = p_fire_time AND r.claimed_by = p_agent_id
      AND r.attempt = p_attempt AND r.lease_token = p_lease_token AND r.job_name = p_job_name AND r.status = 'running'
      AND r.lease_until > now()
    FOR KEY SHARE
),
ins AS (
    INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt)
    SELECT p_entity, p_job_name, p_fire_time, fence.id, fence.attempt FROM fence
    ON CONFLICT (entity, job_name, fire_time) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM ins);
END
$$;
