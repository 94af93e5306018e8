CREATE OR REPLACE FUNCTION cs_complete(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[],
    p_max_attempts integer[], p_backoffs double precision[])
RETURNS TABLE (id bigint, retry_at timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_complete_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                      p_lease_tokens, p_statuses, p_errors, p_retries,
                                      p_max_attempts, p_backoffs)
$$;
