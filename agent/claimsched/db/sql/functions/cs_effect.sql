CREATE OR REPLACE FUNCTION cs_effect(
    p_run_id bigint, p_fire_time timestamptz, p_agent_id text, p_attempt integer,
    p_lease_token uuid, p_entity text, p_job_name text)
RETURNS TABLE (owned boolean, inserted boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_effect_v2(p_run_id, p_fire_time, p_agent_id, p_attempt,
                                    p_lease_token, p_entity, p_job_name)
$$;
