-- Of these Forbid jobs, the ones whose row this transaction could lock (FOR NO KEY UPDATE, in
-- job order, SKIP LOCKED: a row another transaction in flight holds is left out, not waited
-- for), each with whether a run of it is in progress (forbid_in_progress(), read after the
-- lock, so a run that the previous holder of the lock started is seen).
-- Called by: cs_claim_v2 (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_forbid_locked(p_jobs text[])
RETURNS TABLE (job_name text, busy boolean)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_locked text[] := ARRAY(SELECT s.job_name FROM job_schedule s
                             WHERE s.job_name = ANY (p_jobs)
                             ORDER BY s.job_name FOR NO KEY UPDATE OF s SKIP LOCKED);
BEGIN
RETURN QUERY
SELECT l.name, l.name IN (SELECT b.job_name FROM forbid_in_progress(v_locked) AS b)
FROM unnest(v_locked) AS l(name);
END
$$;
