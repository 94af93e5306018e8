-- Graceful shutdown: end this agent's leases now, so that housekeeping orphans them (the agent
-- sweeps at once after it: agent.py).
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_release_v2(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r SET lease_until = now() - interval '1 microsecond'
FROM unnest(p_ids, p_lease_tokens) AS x(id, lease_token)
WHERE r.id = ANY (p_ids) AND r.id = x.id AND r.lease_token = x.lease_token
  AND r.claimed_by = p_agent_id AND r.status = 'running'
RETURNING r.id;
END
$$;
