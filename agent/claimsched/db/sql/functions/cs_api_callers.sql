-- The live agents that call version `p_api` of the agent API (agents.api), with their release:
-- what `claimsched migrate` says still uses each version it serves, and what must be gone
-- before a later release's migration may drop one.
-- Called by: the schema's owner (migrate; no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_api_callers(p_api integer)
RETURNS TABLE (agent_id text, version text)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
SELECT a.agent_id, a.version FROM agents a
WHERE a.api = p_api AND agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
ORDER BY a.agent_id
$$;
