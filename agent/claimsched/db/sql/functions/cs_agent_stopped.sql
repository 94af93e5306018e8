CREATE OR REPLACE FUNCTION cs_agent_stopped(p_agent_id text)
RETURNS TABLE (agent_id text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_agent_stopped_v2(p_agent_id)
$$;
