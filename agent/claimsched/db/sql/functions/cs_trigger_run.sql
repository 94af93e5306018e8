-- A claimsched.io/trigger value asks for one manual run. The trigger's key is inserted with the
-- run, in one statement: whoever comes second with the same key (a retry after a crash, another
-- operator) inserts neither. `known`: the job has a row; `keyed`: the key is new (its fire time,
-- the database's now nudged off whole seconds, so never a scheduled occurrence's key);
-- `requested`: the run is new (NULL with a new key: the fire time was taken, roll back).
-- Called by: the operator and the CLI (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_trigger_run(p_job_name text, p_trigger_key text)
RETURNS TABLE (known boolean, keyed timestamptz, requested timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH job AS (  -- a job outside the caller's scope is as unknown
    SELECT s.job_name FROM job_schedule s
    WHERE s.job_name = p_job_name AND cs_in_scope(p_job_name)
), keyed AS (
    INSERT INTO job_triggers (trigger_key, job_name, fire_time)
    SELECT p_trigger_key, job.job_name,
           now() + CASE WHEN date_trunc('second', now()) = now()
                        THEN interval '1 microsecond' ELSE interval '0' END
    FROM job
    ON CONFLICT (trigger_key) DO NOTHING
    RETURNING job_triggers.job_name, job_triggers.fire_time
), requested AS (
    INSERT INTO job_runs (job_name, fire_time, kind, status, attempt)
    SELECT k.job_name, k.fire_time, 'manual', 'pending', 0 FROM keyed k
    ON CONFLICT (job_name, fire_time) DO NOTHING
    RETURNING job_runs.fire_time
)
SELECT EXISTS (SELECT 1 FROM job),
       (SELECT k.fire_time FROM keyed k),
       (SELECT r.fire_time FROM requested r);
END
$$;
