-- Behind a pooler without a listen_dsn: what NOTIFY would have said, asked every few seconds.
-- `schedules`: a fingerprint of the schedules, their epoch, which moves at every commit that
-- wrote them, in commit order, whichever writer began first (migration 0015). `claimable`:
-- whether a run of the jobs in the caller's own presence row (cs_owns_presence; another
-- login's row says nothing) wants an owner. SECURITY DEFINER: the agent role may read neither
-- the agents table nor other teams' runs.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_poll_v2(p_agent_id text)
RETURNS TABLE (schedules text, claimable boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT (SELECT e.epoch::text FROM schedule_epoch e),
       EXISTS (SELECT 1
               FROM (SELECT DISTINCT r.job_name FROM job_runs r
                     WHERE run_wants_owner(r.status, r.fire_time, r.retry_at)
                     OFFSET 0) w  -- a filter over the few wanted jobs, not 100,000 probes
               WHERE w.job_name = ANY ((SELECT a.handlers FROM agents a
                                        WHERE a.agent_id = p_agent_id
                                          AND cs_owns_presence(a.login_role))::text[]))
$$;
