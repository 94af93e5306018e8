CREATE OR REPLACE FUNCTION cs_release(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_release_v2(p_agent_id, p_ids, p_lease_tokens)
$$;
