-- Renew the leases this agent still owns, all in one statement; a missing id is a lost lease.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_heartbeat_v2(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_leases double precision[])
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
SET lease_until = now() + make_interval(secs => h.lease_seconds)
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_leases)
     AS h(id, fire_time, attempt, lease_token, lease_seconds)
WHERE r.id = h.id AND r.fire_time = h.fire_time AND r.attempt = h.attempt
  AND r.lease_token = h.lease_token AND r.claimed_by = p_agent_id AND r.status = 'running' AND r.lease_until > now()
RETURNING r.id;
END
$$;
