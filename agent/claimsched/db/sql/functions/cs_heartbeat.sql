CREATE OR REPLACE FUNCTION cs_heartbeat(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_leases double precision[])
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_heartbeat_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                       p_lease_tokens, p_leases)
$$;
