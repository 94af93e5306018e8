-- Whether a run wants an owner: a manual or backfill request (pending) whose fire time has come,
-- an orphan (its lease expired, its agent gone), or a failed run whose retry is due. The one
-- definition reclaim, housekeeping and poll share. Inlined where it is called (LANGUAGE sql,
-- STABLE, no SET), so the partial index job_runs_claimable still serves the query.
-- Called by: cs_reclaim_v2, cs_housekeeping_as, cs_poll_v2.
CREATE OR REPLACE FUNCTION run_wants_owner(status text, fire_time timestamptz,
                                           retry_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
SELECT (status = 'pending' AND fire_time <= now()) OR status = 'orphaned'
       OR (status = 'failed' AND retry_at <= now())
$$;
