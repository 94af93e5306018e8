-- concurrencyPolicy Forbid: at most one run of a job in progress (running, whatever its lease,
-- or orphaned and awaiting reclaim). Claim and reclaim call this for their Forbid jobs only:
-- it locks those jobs' schedule rows (in job order, so concurrent callers never deadlock) and
-- then returns their runs in progress. Being VOLATILE, its query reads what had committed when
-- the locks were granted, not the calling statement's older snapshot: of two statements that
-- start runs of one job at once, the second waits for the first to commit and then sees its run.
-- Called by: cs_forbid_locked, cs_reclaim_v2 (no grant: nobody else). First created by
-- migration 0004.
CREATE OR REPLACE FUNCTION forbid_in_progress(jobs text[])
RETURNS TABLE (job_name text, id bigint, fire_time timestamptz, status text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM FROM job_schedule s WHERE s.job_name = ANY (jobs)
        ORDER BY s.job_name FOR NO KEY UPDATE OF s;
    RETURN QUERY
        SELECT r.job_name, r.id, r.fire_time, r.status FROM job_runs r
        WHERE r.job_name = ANY (jobs) AND r.status = 'running'
        UNION ALL
        SELECT r.job_name, r.id, r.fire_time, r.status FROM job_runs r
        WHERE r.job_name = ANY (jobs) AND r.status = 'orphaned';
END
$$;
