-- Claim due occurrences in one statement. Candidates come in as parallel arrays, in this
-- replica's preferred order; `want` is 'running' (run it) or 'skipped' (record why not, in
-- `reason`); `latest` marks a job's newest due occurrence. The database decides: not yet due by
-- its clock, schedule inactive, already taken, Forbid and busy (skip the latest, defer older
-- ones; of a Forbid job's free occurrences only the oldest may run now), or beyond this
-- replica's free slots, or computed from a schedule that has changed since (`since`, the
-- schedule's active_since when the replica read it: 'stale', the replica re-reads it).
-- Returns one row per candidate with its outcome,
-- plus the database clock (mid-statement); Replace fences out the job's older running runs.
-- A claimed run's lease_token is returned here, to its claimer, and nowhere else.
-- Forbid's busy test is cs_forbid_locked(), which locks the job first and reads after the
-- lock: a run that a racing claim or reclaim started is seen (it is called only when some
-- Forbid candidate may run, so claims of Allow and Replace jobs never pay for it). A Forbid job
-- whose row another transaction in flight has locked (a racing claim) is not waited for: its
-- candidates that would run are 'contended', like a key another claim holds (below).
-- Rows are inserted in one global order (job, fire time) so concurrent claims never deadlock.
-- A row is inserted only under a try-lock of its key (a transaction-level advisory lock on the
-- hashes of job name and fire time): a candidate whose key another claim in flight holds is
-- not inserted but 'contended', and the agent proposes it again soon. Without the lock, the
-- insert would wait for that claim's commit, which with a synchronous standby lasts until the
-- standby has confirmed it, and every row this claim won would start that much later. The
-- UNIQUE (job_name, fire_time) still decides every race; a collision of hashes only defers a
-- candidate by one pass; a try-lock never waits, so no lock order can deadlock. At most half
-- of max_locks_per_transaction rows are locked (runs first, in the replica's order), so that
-- a long catch-up never fills the server's lock table; the rest are inserted without the
-- lock, as before, and may wait.
-- A job outside the caller's scope (cs_agent_scope()) is as unknown to it: 'inactive'.
-- Every table is read by key (enable_seqscan off; OFFSET 0 keeps the schedule's lookup and the
-- taken probe one index probe per candidate, not a hash of the whole index):
-- the candidates are few and the tables large, whatever their statistics said when the session
-- planned the statement (it keeps the plan). A plan made while job_runs or job_schedule was
-- small (a new database) hashed or scanned the whole table for every claim, a cost that grew
-- with every run recorded.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_claim_v2(
    p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamptz[],
    p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamptz[])
RETURNS TABLE (job_name text, fire_time timestamptz, outcome text, id bigint, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, notified boolean, db_now timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := cs_agent_scope();
    v_locks integer := current_setting('max_locks_per_transaction')::integer / 2;
BEGIN
RETURN QUERY
WITH cand AS (
    SELECT c.ord, c.job_name, c.fire_time, c.want, c.reason, c.latest,
           s.lease_seconds, s.heartbeat_seconds, s.max_attempts, s.retry_on_failure,
           s.concurrency_policy,
           CASE
               WHEN s.job_name IS NULL OR NOT s.enabled
                    OR c.fire_time <= greatest(s.active_since, s.suspend_until)
                   THEN 'inactive'
               WHEN c.since IS DISTINCT FROM s.active_since THEN 'stale'
               WHEN c.fire_time > now() THEN 'not_due'
               WHEN EXISTS (SELECT 1 FROM job_runs r  -- one index probe per candidate
                            WHERE r.job_name = c.job_name AND r.fire_time = c.fire_time
                            OFFSET 0)
                   THEN 'taken'
               ELSE c.want
           END AS first_verdict
    FROM unnest(p_jobs, p_fire_times, p_wants, p_reasons, p_latest, p_since)
         WITH ORDINALITY AS c(job_name, fire_time, want, reason, latest, since, ord)
    LEFT JOIN LATERAL (SELECT * FROM job_schedule s WHERE s.job_name = c.job_name OFFSET 0) s
        ON v_scope IS NULL OR c.job_name LIKE ANY (v_scope)  -- one probe per candidate
),
forbid AS (
    SELECT f.job_name, f.busy
    FROM cs_forbid_locked(ARRAY(SELECT DISTINCT cand.job_name FROM cand
                                WHERE cand.first_verdict = 'running'
                                  AND cand.concurrency_policy = 'Forbid')) AS f
),
decided AS (
    SELECT cand.*,
           CASE WHEN cand.first_verdict <> 'running' OR cand.concurrency_policy <> 'Forbid'
                    THEN cand.first_verdict
                WHEN cand.job_name NOT IN (SELECT forbid.job_name FROM forbid)
                    THEN 'contended'
                WHEN cand.job_name IN (SELECT forbid.job_name FROM forbid WHERE forbid.busy)
                    THEN CASE WHEN cand.latest THEN 'busy' ELSE 'deferred' END
                WHEN row_number() OVER (PARTITION BY cand.job_name, cand.first_verdict
                                        ORDER BY cand.fire_time) > 1
                    THEN 'deferred'
                ELSE cand.first_verdict END AS verdict
    FROM cand
),
ranked AS (
    SELECT decided.*,
           row_number() OVER (PARTITION BY decided.verdict = 'running'
                              ORDER BY decided.ord) AS slot
    FROM decided
),
inserting AS (
    SELECT ranked.*,
           row_number() OVER (ORDER BY ranked.verdict = 'running' DESC, ranked.ord) AS nth
    FROM ranked
    WHERE ranked.verdict IN ('skipped', 'busy')
       OR (ranked.verdict = 'running' AND ranked.slot <= p_capacity)
),
-- Materialized: each key's lock is tried once, the CASE tries none past the budget.
chosen AS MATERIALIZED (
    SELECT * FROM inserting i
    WHERE CASE WHEN i.nth > v_locks THEN true
               ELSE pg_try_advisory_xact_lock(
                        hashtext(i.job_name),
                        hashint8((extract(epoch FROM i.fire_time) * 1000000)::bigint)) END
),
ins AS (
    INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, lease_until,
                          lease_token, attempt, started_at, finished_at, error)
    SELECT ch.job_name, ch.fire_time, 'scheduled',
           CASE WHEN ch.verdict = 'running' THEN 'running' ELSE 'skipped' END,
           p_agent_id,
           CASE WHEN ch.verdict = 'running'
                THEN now() + make_interval(secs => ch.lease_seconds) END,
           CASE WHEN ch.verdict = 'running' THEN gen_random_uuid() END,
           1, now(),
           CASE WHEN ch.verdict = 'running' THEN NULL ELSE now() END,
           CASE WHEN ch.verdict = 'busy'
                THEN 'skipped: the previous run is still running (concurrencyPolicy Forbid)'
                WHEN ch.verdict = 'skipped' THEN ch.reason END
    FROM chosen ch
    ORDER BY ch.job_name, ch.fire_time
    ON CONFLICT (job_name, fire_time) DO NOTHING
    RETURNING job_runs.id, job_runs.job_name, job_runs.fire_time, job_runs.status,
              job_runs.attempt, job_runs.lease_token, job_runs.lease_until, job_runs.started_at
),
-- Only the runs started for Replace jobs fence out older ones. Materialized, so the update
-- below starts from these (usually none) rather than from every running run: a cached generic
-- plan would join each claimed row to all running runs.
replacing AS MATERIALIZED (
    SELECT ins.job_name, ins.fire_time
    FROM ins JOIN chosen ch ON ch.job_name = ins.job_name AND ch.fire_time = ins.fire_time
    WHERE ch.concurrency_policy = 'Replace' AND ins.status = 'running'
),
replaced AS (
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'replaced by the occurrence at ' || p.fire_time || ' (concurrencyPolicy Replace)'
    FROM replacing p
    WHERE r.job_name = p.job_name AND r.status = 'running' AND r.fire_time < p.fire_time
    RETURNING r.id
)
SELECT c.job_name, c.fire_time,
       CASE WHEN i.id IS NOT NULL THEN
                CASE WHEN i.status = 'running' THEN 'claimed' ELSE 'skipped' END
            WHEN c.verdict = 'running' AND c.slot > p_capacity THEN 'no_capacity'
            WHEN c.verdict IN ('running', 'skipped', 'busy') AND ch.ord IS NULL
                THEN 'contended'
            WHEN c.verdict IN ('running', 'skipped', 'busy') THEN 'taken'
            ELSE c.verdict END,
       i.id, i.attempt, i.lease_token, i.lease_until, i.started_at,
       c.lease_seconds, c.heartbeat_seconds, c.max_attempts, c.retry_on_failure,
       CASE WHEN EXISTS (SELECT 1 FROM replaced)
            THEN pg_notify('claimsched_runs', cs_schema_name())::text = '' END,
       now() + (clock_timestamp() - now()) / 2
FROM (SELECT now()) AS clock
LEFT JOIN ranked c ON true
LEFT JOIN chosen ch ON ch.ord = c.ord
LEFT JOIN ins i ON i.job_name = c.job_name AND i.fire_time = c.fire_time
ORDER BY c.ord;
END
$$;
