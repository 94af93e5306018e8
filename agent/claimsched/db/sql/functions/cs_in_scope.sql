-- Whether job `p_job_name` is in the caller's scope (cs_agent_scope(): no scope, every job).
-- Called by: cs_upsert_schedule, cs_request_runs, cs_trigger_run (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_in_scope(p_job_name text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
SELECT v.scope IS NULL OR coalesce(p_job_name LIKE ANY (v.scope), false)
FROM (SELECT cs_agent_scope() AS scope) AS v
$$;
