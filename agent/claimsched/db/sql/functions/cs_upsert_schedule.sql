-- Create or replace a schedule; a job has one owner (claimsched.records.Written). Every writer (a
-- code declaration, the CLI, a ClaimSchedule through the operator) writes a new row, its own
-- row, or a row a ClaimSchedule released; the CLI also overrides a code declaration. Nothing
-- else: a refusal is never a silent takeover. A code declaration keeps the suspension of its
-- own row (the spec_upserted list of db/queries.py: `claimsched suspend` / `resume` set it).
-- `p_spec` holds the job_name and the spec columns by name (JobSpec.row()).
-- `source`/`owner`: the row's owner before the statement (NULL: no row); `written` whether
-- the row changed, `created` whether it is new. A job outside the caller's scope (a scoped
-- role's: cs_in_scope) is not written.
-- Called by: the operator and the CLI (`claimsched roles`); agents declare through
-- cs_declare_schedule_v2.
CREATE OR REPLACE FUNCTION cs_upsert_schedule(p_spec jsonb)
RETURNS TABLE (source text, owner text, written boolean, created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
IF NOT cs_in_scope(p_spec ->> 'job_name') THEN  -- the row's owner, if any; no write
    RETURN QUERY
    SELECT s.source, s.owner, false, false
    FROM (SELECT) AS one LEFT JOIN job_schedule s ON s.job_name = p_spec ->> 'job_name';
    RETURN;
END IF;
RETURN QUERY
WITH spec AS (
    SELECT * FROM jsonb_populate_record(NULL::job_schedule, p_spec)
), before AS (
    SELECT s.source, s.owner FROM job_schedule s, spec WHERE s.job_name = spec.job_name
), written AS (
    INSERT INTO job_schedule AS s (job_name, "schedule", "time_zone", "enabled", "lease_seconds", "heartbeat_seconds", "max_attempts", "retry_on_failure", "concurrency_policy", "catch_up_window_seconds", "catch_up_policy", "max_runtime_seconds", "source", "owner", "suspend_reason", "suspend_until")
    SELECT spec.job_name, "spec"."schedule", "spec"."time_zone", "spec"."enabled", "spec"."lease_seconds", "spec"."heartbeat_seconds", "spec"."max_attempts", "spec"."retry_on_failure", "spec"."concurrency_policy", "spec"."catch_up_window_seconds", "spec"."catch_up_policy", "spec"."max_runtime_seconds", "spec"."source", "spec"."owner", "spec"."suspend_reason", "spec"."suspend_until" FROM spec
    ON CONFLICT (job_name) DO UPDATE SET ("schedule", "time_zone", "enabled", "lease_seconds", "heartbeat_seconds", "max_attempts", "retry_on_failure", "concurrency_policy", "catch_up_window_seconds", "catch_up_policy", "max_runtime_seconds", "source", "owner", "suspend_reason", "suspend_until") = ROW("excluded"."schedule", "excluded"."time_zone", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."enabled" ELSE "excluded"."enabled" END, "excluded"."lease_seconds", "excluded"."heartbeat_seconds", "excluded"."max_attempts", "excluded"."retry_on_failure", "excluded"."concurrency_policy", "excluded"."catch_up_window_seconds", "excluded"."catch_up_policy", "excluded"."max_runtime_seconds", "excluded"."source", "excluded"."owner", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_reason" ELSE "excluded"."suspend_reason" END, CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_until" ELSE "excluded"."suspend_until" END)
    WHERE (s.source = EXCLUDED.source AND s.owner IS NOT DISTINCT FROM EXCLUDED.owner
           OR s.source = 'operator' AND s.owner IS NULL
           OR s.source = 'code' AND EXCLUDED.source = 'cli')
      AND ROW("s"."schedule", "s"."time_zone", "s"."enabled", "s"."lease_seconds", "s"."heartbeat_seconds", "s"."max_attempts", "s"."retry_on_failure", "s"."concurrency_policy", "s"."catch_up_window_seconds", "s"."catch_up_policy", "s"."max_runtime_seconds", "s"."source", "s"."owner", "s"."suspend_reason", "s"."suspend_until") IS DISTINCT FROM ROW("excluded"."schedule", "excluded"."time_zone", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."enabled" ELSE "excluded"."enabled" END, "excluded"."lease_seconds", "excluded"."heartbeat_seconds", "excluded"."max_attempts", "excluded"."retry_on_failure", "excluded"."concurrency_policy", "excluded"."catch_up_window_seconds", "excluded"."catch_up_policy", "excluded"."max_runtime_seconds", "excluded"."source", "excluded"."owner", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_reason" ELSE "excluded"."suspend_reason" END, CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_until" ELSE "excluded"."suspend_until" END)
    RETURNING (xmax = 0) AS created
)
SELECT (SELECT b.source FROM before b),
       (SELECT b.owner FROM before b),
       EXISTS (SELECT 1 FROM written),
       coalesce((SELECT w.created FROM written w), false);
END
$$;
