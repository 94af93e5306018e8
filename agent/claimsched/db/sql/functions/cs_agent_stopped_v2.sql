-- Graceful shutdown: this agent is gone (its peers are told, to take over its turns). Only
-- the login that created the agent's row may say so (cs_owns_presence).
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_agent_stopped_v2(p_agent_id text)
RETURNS TABLE (agent_id text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE agents a SET stopped_at = now(), last_seen = now()
WHERE a.agent_id = p_agent_id AND cs_owns_presence(a.login_role)
RETURNING a.agent_id;
PERFORM pg_notify('claimsched_agents', cs_schema_name());  -- its peers sweep: one fewer
END
$$;
