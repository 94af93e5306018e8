-- A manual or backfill occurrence for an agent to pick up (pending, attempt 0); none for a
-- job outside the caller's scope.
-- Called by: the operator and the CLI (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_request_runs(p_job_name text, p_fire_times timestamptz[],
                                           p_kind text)
RETURNS TABLE (id bigint, fire_time timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
IF p_kind = 'backfill' THEN  -- past occurrences: an operator's counts of settled history are void
    UPDATE history_epoch SET epoch = epoch + 1;
END IF;
RETURN QUERY
INSERT INTO job_runs (job_name, fire_time, kind, status, attempt)
SELECT s.job_name, f.fire_time, p_kind, 'pending', 0
FROM job_schedule s, unnest(p_fire_times) AS f(fire_time)
WHERE s.job_name = p_job_name AND p_kind IN ('manual', 'backfill')
  AND cs_in_scope(p_job_name)
ON CONFLICT (job_name, fire_time) DO NOTHING
RETURNING job_runs.id, job_runs.fire_time;
END
$$;
