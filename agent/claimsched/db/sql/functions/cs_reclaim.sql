CREATE OR REPLACE FUNCTION cs_reclaim(p_agent_id text, p_jobs text[], p_capacity integer)
RETURNS TABLE (id bigint, job_name text, fire_time timestamptz, kind text, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               orphan_count integer,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, db_now timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_reclaim_v2(p_agent_id, p_jobs, p_capacity)
$$;
