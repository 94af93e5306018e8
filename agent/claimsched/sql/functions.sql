-- claimsched: the functions through which agents (and the operator, for runs) write. Code, not
-- schema: `claimsched migrate` applies this whole file again, with CREATE OR REPLACE, inside its
-- migration-lock transaction, after the schema and its migrations. Change a statement here and
-- re-run migrate; no migration needed. (The functions agents call never change their arguments
-- or result columns: see the API versions below. For any other, such a change needs a DROP of
-- the old version first, below. A dropped function loses its grants: this file
-- grants the new one again, at its end, to every role that could call the one of the same name
-- before, so a migrate leaves agents working; a new function waits for `claimsched roles`.)
--
-- Every function is SECURITY DEFINER: it runs with the rights of the role that ran migrate (the
-- schema's owner), so the roles of `claimsched roles` write nothing but through these fenced
-- statements. Each one fixes its search_path: pg_catalog first, so that no function or operator
-- of another schema can stand in for a built-in one (gen_random_uuid(), now(), =), then
-- claimsched's schema (only its owner may create objects in it: migrate and roles refuse a
-- schema where anyone else may), then pg_temp, last, so that no caller's temporary table or
-- function can stand in for ours; calls to claimsched's own functions name the schema. Its
-- NOTIFYs carry the schema's name, written in (current_schema() would be pg_catalog here).
-- EXECUTE is revoked from PUBLIC at the end of this file: `claimsched roles` grants it.
--
-- The schema's quoted name, its name as a string literal and the spec column lists of
-- db/queries.py (in braces) are filled in when migrate applies the file (so: no other braces
-- in this file).
-- Parameters are p_<name> (plpgsql would confuse them with columns); `#variable_conflict
-- use_column` lets the result columns share the names of the table columns they return.
-- plpgsql with RETURN QUERY: the plan of each statement is cached per session, as a prepared
-- statement's would be. So the functions agents call for every run or every period (claim,
-- reclaim, release, effect, housekeeping) read by index whatever the statistics said when the
-- session planned them (SET enable_seqscan = off), and name their rows by key (`r.id = ANY
-- (p_ids)`, a probe per row in a sublink) rather than leave a join to the planner: planned
-- while the tables were small (a new database), a statement scanned every run or schedule
-- until the next analyze, a cost that grew with every run recorded
-- (tests/integration/test_run_plans.py). Only the partial indexes of live runs (running,
-- claimable) may be read whole. Not heartbeat and complete: with enable_seqscan off, planned on
-- a nearly empty table, they read the whole (job_name, fire_time) index once per run (12.9
-- against 2.9 ms per complete of 30 runs as job_runs grew to 18,000 rows); their plan is left
-- to the statistics, which autovacuum's first analyze of the partition corrects.
--
-- The functions agents call are an API with versions, since a rolling upgrade runs the agents of
-- two releases against one schema (README, "Upgrading"). API 1 is claimsched 0.1.0's: cs_claim,
-- cs_reclaim, cs_heartbeat, cs_complete, cs_housekeeping, cs_release, cs_agent_stopped,
-- cs_effect, cs_declare_schedule. API N >= 2 is the same functions named cs_<name>_vN; an agent
-- calls the functions of one version only (claimsched.db.migrations.AGENT_API). agent_apis
-- (migration 0017) lists the versions this schema serves, agents.api which one each agent
-- calls. A released version never changes its names, arguments or result columns: a change is
-- the next version, beside it. An older version is a thin wrapper over the newest (the end of
-- this file), so the same statements decide every run whichever release claimed it; it goes
-- with a later release's migration, once no live agent calls it.
--
-- Who owns a run: its fencing token (id, fire_time, attempt), the agent id it was claimed with,
-- and its lease token, a secret that every claim and reclaim draws anew and returns only to the
-- claimer. Agent ids and fencing tokens show in logs and statuses, and an agent id may be set by
-- hand: the lease token is what another agent sharing the role cannot know. Every statement on
-- an owned run (renew, complete, release, receipt) matches all three.

-- claimsched's functions in this schema, as they are at each moment of this file.
CREATE TEMP VIEW cs_functions AS
SELECT p.oid::regprocedure AS f, p.proname AS name, p.proargnames AS argnames, p.proacl AS acl,
       p.proowner AS owner
FROM pg_proc p
WHERE p.pronamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = current_schema())
  AND p.proname LIKE 'cs\_%';

-- Who may call which function now, by name (any version's: cs_<name>_vN counts as cs_<name>):
-- granted again at the end of this file.
CREATE TEMP TABLE cs_callers AS
SELECT regexp_replace(c.name, '_v[0-9]+$', '') AS name, a.grantee::regrole AS grantee
FROM pg_temp.cs_functions c, aclexplode(c.acl) a
WHERE a.privilege_type = 'EXECUTE' AND a.grantee NOT IN (0, c.owner);

-- The versions from before lease tokens (migration 0009): their arguments or result columns
-- have none.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
             WHERE c.name IN ('cs_claim', 'cs_reclaim', 'cs_heartbeat', 'cs_complete',
                              'cs_release', 'cs_effect')
               AND NOT EXISTS (SELECT FROM unnest(c.argnames) AS a(name)
                               WHERE a.name LIKE '%lease\_token%')
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;

-- The versions from before peers (migration 0012): no `joined` result column.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
             WHERE c.name = 'cs_housekeeping' AND NOT 'joined' = ANY (c.argnames)
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;

-- API 1's cs_housekeeping has claimsched 0.1.0's result columns; a schema migrated between
-- 0.1.0 and 0.2.0 had one with `next_expiry` (now API 2's) under that name.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
             WHERE c.name = 'cs_housekeeping' AND 'next_expiry' = ANY (c.argnames)
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;

-- The jobs the caller may act for (agent_scopes, migration 0011): NULL for every job, else the
-- LIKE patterns of its login role (session_user: inside these functions current_user is their
-- owner) and of the roles it is a member of. The owner and its members (a superuser too) are
-- never scoped. Read once per call, so an unscoped claim pays one look-up, never one per job.
-- SECURITY DEFINER: the row-level security of sql/policies.sql calls it with a reader's rights,
-- and it answers for the caller's own scope only (every role may call it: policies.sql).
-- Called by: cs_claim_v2, cs_reclaim_v2, cs_housekeeping_as, cs_in_scope, the policies.
CREATE OR REPLACE FUNCTION cs_agent_scope()
RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT CASE WHEN NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
    (SELECT array_agg(s.job_pattern)  -- NULL for no row
     FROM agent_scopes s JOIN pg_roles r ON r.rolname = s.role
     WHERE pg_has_role(session_user, r.oid, 'MEMBER'))
END
$$;

-- Whether job `p_job_name` is in the caller's scope (cs_agent_scope(): no scope, every job).
-- Called by: cs_upsert_schedule, cs_request_runs, cs_trigger_run (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_in_scope(p_job_name text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT v.scope IS NULL OR coalesce(p_job_name LIKE ANY (v.scope), false)
FROM (SELECT {schema}.cs_agent_scope() AS scope) AS v
$$;

-- Whether the caller may write the presence row of an agent created by `p_login_role`
-- (migration 0016): its own login (session_user: inside the functions current_user is their
-- owner), the schema's owner and its members, or anyone for a row from before the column.
-- Called by: cs_housekeeping_as, cs_agent_stopped_v2 (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_owns_presence(p_login_role text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT p_login_role IS NULL OR p_login_role = session_user
       OR pg_has_role(session_user, current_user, 'MEMBER')
$$;

-- Of these Forbid jobs, the ones whose row this transaction could lock (FOR NO KEY UPDATE, in
-- job order, SKIP LOCKED: a row another transaction in flight holds is left out, not waited
-- for), each with whether a run of it is in progress (forbid_in_progress(), read after the
-- lock, so a run that the previous holder of the lock started is seen).
-- Called by: cs_claim_v2 (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_forbid_locked(p_jobs text[])
RETURNS TABLE (job_name text, busy boolean)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_locked text[] := ARRAY(SELECT s.job_name FROM job_schedule s
                             WHERE s.job_name = ANY (p_jobs)
                             ORDER BY s.job_name FOR NO KEY UPDATE OF s SKIP LOCKED);
BEGIN
RETURN QUERY
SELECT l.name, l.name IN (SELECT b.job_name FROM {schema}.forbid_in_progress(v_locked) AS b)
FROM unnest(v_locked) AS l(name);
END
$$;

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
-- with every run recorded (pgbench: a scan of all runs per statement).
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_claim_v2(
    p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamptz[],
    p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamptz[])
RETURNS TABLE (job_name text, fire_time timestamptz, outcome text, id bigint, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, notified boolean, db_now timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := {schema}.cs_agent_scope();
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
    FROM {schema}.cs_forbid_locked(ARRAY(SELECT DISTINCT cand.job_name FROM cand
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
-- plan joined each claimed row to all running runs (86 of 91 ms with 1,500 runs in flight).
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
            THEN pg_notify('claimsched_runs', {schema_name})::text = '' END,
       now() + (clock_timestamp() - now()) / 2
FROM (SELECT now()) AS clock
LEFT JOIN ranked c ON true
LEFT JOIN chosen ch ON ch.ord = c.ord
LEFT JOIN ins i ON i.job_name = c.job_name AND i.fire_time = c.fire_time
ORDER BY c.ord;
END
$$;

-- Take over runs that want an owner: manual/backfill requests (pending) whose fire time has
-- come, orphans (first: they are runs in progress), and failed runs whose retry is due.
-- attempt + 1 is the new fencing token, and a new lease_token (returned to this claimer only)
-- fences out the previous owner even if it had the same agent id. A Forbid job starts at most one run, and none while
-- another of its runs is in progress (read by forbid_in_progress(), after its lock); an
-- orphan yields only to a running run or an older orphan. Only the jobs of the caller's scope
-- (cs_agent_scope()) are considered. p_jobs NULL: the jobs of the agents row of p_agent_id
-- (housekeeping keeps the list there: with 100,000 jobs, sending it was megabytes per call).
-- The attempt a taken run had (orphaned, fenced out, or failed and retried) is kept in
-- job_attempts, with its owner, times and error: the occurrence's history.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_reclaim_v2(p_agent_id text, p_jobs text[], p_capacity integer)
RETURNS TABLE (id bigint, job_name text, fire_time timestamptz, kind text, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               orphan_count integer,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, db_now timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := {schema}.cs_agent_scope();
BEGIN
IF p_jobs IS NULL THEN  -- the agent's job list as housekeeping keeps it in its agents row
    SELECT a.handlers INTO p_jobs FROM agents a WHERE a.agent_id = p_agent_id;
END IF;
IF v_scope IS NOT NULL THEN
    p_jobs := ARRAY(SELECT j.name FROM unnest(p_jobs) AS j(name) WHERE j.name LIKE ANY (v_scope));
END IF;
RETURN QUERY
WITH picked AS (
    SELECT r.id, r.job_name, r.fire_time, r.status, r.attempt, r.claimed_by, r.started_at,
           r.finished_at, r.lease_until, r.error
    FROM job_runs r
    WHERE r.job_name = ANY(p_jobs)
      AND ((r.status = 'pending' AND r.fire_time <= now()) OR r.status = 'orphaned'
           OR (r.status = 'failed' AND r.retry_at <= now()))
    ORDER BY r.status = 'orphaned' DESC, r.fire_time
    LIMIT p_capacity
    FOR UPDATE OF r SKIP LOCKED
),
forbid AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.job_name
                                   ORDER BY p.status = 'orphaned' DESC, p.fire_time) AS nth
    FROM picked p
    WHERE EXISTS (SELECT 1 FROM job_schedule s
                  WHERE s.job_name = p.job_name AND s.concurrency_policy = 'Forbid' OFFSET 0)
),
busy AS (
    SELECT * FROM {schema}.forbid_in_progress(ARRAY(SELECT DISTINCT f.job_name FROM forbid f))
),
taken AS (
    SELECT p.id, p.fire_time FROM picked p
    WHERE NOT EXISTS (
        SELECT 1 FROM forbid f
        WHERE f.id = p.id AND f.fire_time = p.fire_time
          AND (f.nth > 1
               OR EXISTS (SELECT 1 FROM busy b
                          WHERE b.job_name = f.job_name AND b.id <> f.id
                            AND (b.status = 'running' OR f.status <> 'orphaned'
                                 OR b.fire_time < f.fire_time))))
),
superseded AS (  -- the attempt each taken run had before: its history
    INSERT INTO job_attempts (job_name, fire_time, attempt, run_id, claimed_by, started_at,
                              ended_at, outcome, error)
    SELECT p.job_name, p.fire_time, p.attempt, p.id, p.claimed_by, p.started_at,
           coalesce(p.finished_at, p.lease_until),
           CASE WHEN p.status = 'failed' THEN 'failed'
                WHEN p.error LIKE 'fenced out %' THEN 'fenced_out' ELSE 'orphaned' END,
           p.error
    FROM picked p JOIN taken t ON t.id = p.id AND t.fire_time = p.fire_time
    WHERE p.status <> 'pending'
    ON CONFLICT (job_name, fire_time, attempt) DO NOTHING
)
UPDATE job_runs r
SET status = 'running', attempt = r.attempt + 1, claimed_by = p_agent_id,
    lease_token = gen_random_uuid(), lease_until = now() + make_interval(secs => s.lease_seconds), started_at = now(),
    finished_at = NULL, retry_at = NULL
FROM taken, job_schedule s
WHERE r.id = taken.id AND r.fire_time = taken.fire_time AND s.job_name = r.job_name
RETURNING r.id, r.job_name, r.fire_time, r.kind, r.attempt, r.lease_token, r.lease_until,
          r.started_at, r.orphan_count, s.lease_seconds, s.heartbeat_seconds, s.max_attempts,
          s.retry_on_failure, now();
END
$$;

-- Renew the leases this agent still owns, all in one statement; a missing id is a lost lease.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_heartbeat_v2(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_leases double precision[])
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
SET lease_until = now() + make_interval(secs => h.lease_seconds)
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_leases)
     AS h(id, fire_time, attempt, lease_token, lease_seconds)
WHERE r.id = h.id AND r.fire_time = h.fire_time AND r.attempt = h.attempt
  AND r.lease_token = h.lease_token AND r.claimed_by = p_agent_id AND r.status = 'running' AND r.lease_until > now()
RETURNING r.id;
END
$$;

-- Record the outcome of finished runs (batched), fenced by owner, attempt (the fencing
-- token) and lease token. The lease need not be alive: a handler that finished while the
-- database was away longer than its lease is recorded if nobody took the run over meanwhile
-- (still running, or orphaned by the reaper but not reclaimed: a reclaim sets a new owner and
-- attempt). A run fenced out for good (failed: max_runtime, Replace, attempts exhausted) stays
-- as it is. A failure is retried later when its job allows it and attempts remain. 'done' and
-- 'failed' are the job's outcomes: a finished run is never reopened, nor set back to pending.
-- 'fenced_out' is not an outcome: the handler ended because this agent lost the lease, so the
-- run goes back for the next attempt (orphaned, claimable at once: the agents are told), its
-- error saying why, or fails for good when that was its last attempt (max_attempts, as the
-- reaper does). An attempt superseded so is kept in job_attempts by the reclaim that follows.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_complete_v2(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[], p_max_attempts integer[],
    p_backoffs double precision[])
RETURNS TABLE (id bigint, retry_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
SET status = CASE WHEN c.status <> 'fenced_out' THEN c.status
                  WHEN r.attempt >= c.max_attempts THEN 'failed' ELSE 'orphaned' END,
    finished_at = CASE WHEN c.status <> 'fenced_out' OR r.attempt >= c.max_attempts
                       THEN now() END,
    error = CASE WHEN c.status <> 'fenced_out' THEN c.error
                 ELSE 'fenced out (claimed by ' || r.claimed_by || ', attempt ' || r.attempt
                      || '): ' || coalesce(c.error, 'the lease was lost')
                      || CASE WHEN r.attempt >= c.max_attempts
                              THEN '; attempts exhausted' ELSE '' END END,
    lease_until = least(r.lease_until, now()),
    orphan_count = r.orphan_count
                   + CASE WHEN c.status = 'fenced_out' AND r.status = 'running' THEN 1 ELSE 0 END,
    retry_at = CASE WHEN c.status = 'failed' AND c.retry AND r.attempt < c.max_attempts
                    THEN now() + make_interval(secs => c.backoff) END
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_statuses, p_errors, p_retries,
            p_max_attempts, p_backoffs)
     AS c(id, fire_time, attempt, lease_token, status, error, retry, max_attempts, backoff)
WHERE r.id = c.id AND r.fire_time = c.fire_time AND r.attempt = c.attempt
  AND r.lease_token = c.lease_token
  AND r.claimed_by = p_agent_id AND r.status IN ('running', 'orphaned')
  AND c.status IN ('done', 'failed', 'fenced_out')
RETURNING r.id, r.retry_at;
IF 'fenced_out' = ANY (p_statuses) THEN  -- runs given back want an owner now
    PERFORM pg_notify('claimsched_runs', {schema_name});
END IF;
END
$$;

-- One cheap statement every few seconds from every agent: refresh presence, turn expired
-- leases into orphans (or failures once attempts are exhausted), fail runs past max_runtime,
-- and say whether any run this agent could take wants an owner. Wakes the others if needed.
-- Also how durable commits are now, for the agent's metric and `agents`.
-- p_handlers is the agent's job list, sent when it starts and whenever `present` said its row
-- lacked one; NULL keeps the row's (an agent may have 100,000 jobs: the list is written once,
-- not every period). `present` is 1 when this agent's row holds its list after the call, 0 when
-- it had none (the row was gone and is back without one): the agent sends the list again.
-- Which runs are this agent's to take is read from its row, as a filter over the few jobs
-- that have such runs (OFFSET 0: the list must not become 100,000 index probes).
-- The row is written only by the login that created it (cs_owns_presence): another's agent id
-- gets `present` 0 and changes nothing. A scoped role's list keeps the jobs of its scope only.
-- `peers`: the live agents with the same job list (its digest, written with the list), the
-- caller among them, sorted; each occurrence's first claimer is one of them (turns.py). An
-- agent that was not a live peer before this call (new, back, or with another list) NOTIFYs
-- claimsched_agents: the others sweep at once, to learn of it (`joined`).
-- `next_expiry`: the earliest end of a lease still running on a run of this agent's jobs that
-- another agent holds (NULL: none), for the agent to sweep again right after it (housekeeping.py):
-- an owner that is gone renews nothing, and its run is reaped one lease after its last renewal,
-- not at the next period. The agent's own leases are left out: it renews them itself. The
-- partial index of running runs is read whole, as the reaper reads it; a run is of this agent's
-- jobs when an agent with the same job list (its digest) holds it, or else by its name.
-- `p_api`: the version of the API the agent calls (agents.api), which the caller's version
-- fixes: cs_housekeeping_v2 says 2, API 1's cs_housekeeping 1.
-- Called by: cs_housekeeping_v2, cs_housekeeping (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_housekeeping_as(
    p_api integer, p_agent_id text, p_hostname text, p_pod text, p_namespace text,
    p_handlers text[], p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[],
               next_expiry timestamptz)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := {schema}.cs_agent_scope();
BEGIN
IF v_scope IS NOT NULL AND p_handlers IS NOT NULL THEN  -- a scoped role lists its jobs only
    p_handlers := ARRAY(SELECT h FROM unnest(p_handlers) AS h WHERE h LIKE ANY (v_scope));
END IF;
RETURN QUERY
WITH presence AS (
    INSERT INTO agents (agent_id, hostname, pod, namespace, handlers, handlers_digest, version,
                        ttl_seconds, tzdata, durability, login_role, api)
    VALUES (p_agent_id, p_hostname, p_pod, p_namespace, coalesce(p_handlers, ARRAY[]::text[]),
            md5(array_to_string(p_handlers, E'\n')), p_version, p_ttl_seconds, p_tzdata,
            (SELECT d.durability FROM {schema}.database_identity() d), session_user, p_api)
    ON CONFLICT (agent_id) DO UPDATE
    SET last_seen = now(), handlers = coalesce(p_handlers, agents.handlers),
        handlers_digest = coalesce(EXCLUDED.handlers_digest, agents.handlers_digest),
        ttl_seconds = EXCLUDED.ttl_seconds, stopped_at = NULL, durability = EXCLUDED.durability,
        login_role = coalesce(agents.login_role, EXCLUDED.login_role), version = EXCLUDED.version,
        api = EXCLUDED.api
    WHERE {schema}.cs_owns_presence(agents.login_role)
    RETURNING agents.handlers, agents.handlers_digest
),
expired AS (
    UPDATE job_runs r
    SET status = CASE WHEN r.attempt >= s.max_attempts THEN 'failed' ELSE 'orphaned' END,
        orphan_count = r.orphan_count + 1,
        finished_at = CASE WHEN r.attempt >= s.max_attempts THEN now() END,
        error = 'lease expired (claimed by ' || r.claimed_by || ', attempt ' || r.attempt || ')'
                || CASE WHEN r.attempt >= s.max_attempts
                        THEN '; attempts exhausted' ELSE '' END
    FROM job_schedule s
    WHERE s.job_name = r.job_name AND r.status = 'running' AND r.lease_until < now()
    RETURNING r.id, r.job_name, r.status
),
overdue AS (  -- a probe of its job per running run, never a scan of the schedules
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'max_runtime of ' || (SELECT s.max_runtime_seconds FROM job_schedule s
                                      WHERE s.job_name = r.job_name) || ' s exceeded'
    WHERE r.status = 'running' AND r.lease_until >= now()
      AND r.started_at + make_interval(secs => (SELECT s.max_runtime_seconds FROM job_schedule s
                                                WHERE s.job_name = r.job_name)) < now()
    RETURNING r.id
)
SELECT (SELECT count(*) FROM presence p WHERE cardinality(p.handlers) > 0),
       (SELECT count(*) FROM expired e WHERE e.status = 'orphaned'),
       (SELECT count(*) FROM expired e WHERE e.status = 'failed'),
       (SELECT count(*) FROM overdue),
       EXISTS (SELECT 1
               FROM (SELECT DISTINCT r.job_name FROM job_runs r
                     WHERE (r.status = 'pending' AND r.fire_time <= now())
                        OR r.status = 'orphaned' OR (r.status = 'failed' AND r.retry_at <= now())
                     OFFSET 0) w
               WHERE w.job_name = ANY((SELECT p.handlers FROM presence p)::text[]))
       OR EXISTS (SELECT 1 FROM expired e
                  WHERE e.status = 'orphaned'
                    AND e.job_name = ANY((SELECT p.handlers FROM presence p)::text[])),
       CASE WHEN EXISTS (SELECT 1 FROM expired e WHERE e.status = 'orphaned')
            THEN pg_notify('claimsched_runs', {schema_name})::text = '' END,
       now(),
       i.system_identifier, i.timeline, i.durability,
       -- A peer is new (or back): wake the other agents, whose peers changed.
       CASE WHEN NOT EXISTS (
                SELECT 1 FROM agents a
                WHERE a.agent_id = p_agent_id AND a.stopped_at IS NULL
                  AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()
                  AND a.handlers_digest = (SELECT p.handlers_digest FROM presence p))
            THEN pg_notify('claimsched_agents', {schema_name})::text = '' END,
       ARRAY(SELECT p_agent_id
             UNION
             SELECT a.agent_id FROM agents a
             WHERE a.handlers_digest = (SELECT p.handlers_digest FROM presence p)
               AND a.stopped_at IS NULL
               AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()
             ORDER BY 1),
       (SELECT min(r.lease_until) FROM job_runs r
        WHERE r.status = 'running' AND r.lease_until >= now() AND r.claimed_by <> p_agent_id
          AND (r.claimed_by = ANY (ARRAY(
                   SELECT a.agent_id FROM agents a
                   WHERE a.handlers_digest = (SELECT p.handlers_digest FROM presence p)))
               OR r.job_name = ANY ((SELECT p.handlers FROM presence p)::text[])))
FROM {schema}.database_identity() i;
END
$$;

-- Housekeeping (cs_housekeeping_as) for an agent of API 2.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_housekeeping_v2(
    p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[],
    p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[],
               next_expiry timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_housekeeping_as(2, p_agent_id, p_hostname, p_pod, p_namespace,
                                          p_handlers, p_version, p_ttl_seconds, p_tzdata)
$$;

-- Graceful shutdown: end this agent's leases now, so that housekeeping orphans them (the agent
-- sweeps at once after it: agent.py).
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_release_v2(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r SET lease_until = now() - interval '1 microsecond'
FROM unnest(p_ids, p_lease_tokens) AS x(id, lease_token)
WHERE r.id = ANY (p_ids) AND r.id = x.id AND r.lease_token = x.lease_token
  AND r.claimed_by = p_agent_id AND r.status = 'running'
RETURNING r.id;
END
$$;

-- Behind a pooler without a listen_dsn: what NOTIFY would have said, asked every few seconds.
-- `schedules`: a fingerprint of the schedules, their epoch, which moves at every commit that
-- wrote them, in commit order, whichever writer began first (migration 0015). `claimable`:
-- whether a run of the jobs in the caller's own presence row (cs_owns_presence; another
-- login's row says nothing) wants an owner. SECURITY DEFINER: the agent role may read neither
-- the agents table nor other teams' runs.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_poll_v2(p_agent_id text)
RETURNS TABLE (schedules text, claimable boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT (SELECT e.epoch::text FROM schedule_epoch e),
       EXISTS (SELECT 1
               FROM (SELECT DISTINCT r.job_name FROM job_runs r
                     WHERE (r.status = 'pending' AND r.fire_time <= now())
                        OR r.status = 'orphaned' OR (r.status = 'failed' AND r.retry_at <= now())
                     OFFSET 0) w  -- a filter over the few wanted jobs, not 100,000 probes
               WHERE w.job_name = ANY ((SELECT a.handlers FROM agents a
                                        WHERE a.agent_id = p_agent_id
                                          AND {schema}.cs_owns_presence(a.login_role))::text[]))
$$;

-- Graceful shutdown: this agent is gone (its peers are told, to take over its turns). Only
-- the login that created the agent's row may say so (cs_owns_presence).
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_agent_stopped_v2(p_agent_id text)
RETURNS TABLE (agent_id text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE agents a SET stopped_at = now(), last_seen = now()
WHERE a.agent_id = p_agent_id AND {schema}.cs_owns_presence(a.login_role)
RETURNING a.agent_id;
PERFORM pg_notify('claimsched_agents', {schema_name});  -- its peers sweep: one fewer
END
$$;

-- Record a side effect's receipt if this run still owns its occurrence. `owned` false means
-- the lease was lost (fenced); `inserted` false means the receipt already existed.
-- The fence row stays locked FOR KEY SHARE until the receipt's transaction ends: no reclaim
-- (attempt + 1, a key update) can pass it meanwhile, so the fence holds at commit. The
-- receipt is for the run's own job: a lease of one job never writes another job's receipts.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_effect_v2(
    p_run_id bigint, p_fire_time timestamptz, p_agent_id text, p_attempt integer,
    p_lease_token uuid, p_entity text, p_job_name text)
RETURNS TABLE (owned boolean, inserted boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp
    SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH fence AS (
    SELECT r.id, r.attempt FROM job_runs r
    WHERE r.id = p_run_id AND r.fire_time = p_fire_time AND r.claimed_by = p_agent_id
      AND r.attempt = p_attempt AND r.lease_token = p_lease_token AND r.job_name = p_job_name AND r.status = 'running'
      AND r.lease_until > now()
    FOR KEY SHARE
),
ins AS (
    INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt)
    SELECT p_entity, p_job_name, p_fire_time, fence.id, fence.attempt FROM fence
    ON CONFLICT (entity, job_name, fire_time) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM ins);
END
$$;

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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
IF NOT {schema}.cs_in_scope(p_spec ->> 'job_name') THEN  -- the row's owner, if any; no write
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
    INSERT INTO job_schedule AS s (job_name, {spec_columns})
    SELECT spec.job_name, {spec_fields} FROM spec
    ON CONFLICT (job_name) DO UPDATE SET ({spec_columns}) = ROW({spec_upserted})
    WHERE (s.source = EXCLUDED.source AND s.owner IS NOT DISTINCT FROM EXCLUDED.owner
           OR s.source = 'operator' AND s.owner IS NULL
           OR s.source = 'code' AND EXCLUDED.source = 'cli')
      AND ROW({spec_current}) IS DISTINCT FROM ROW({spec_upserted})
    RETURNING (xmax = 0) AS created
)
SELECT (SELECT b.source FROM before b),
       (SELECT b.owner FROM before b),
       EXISTS (SELECT 1 FROM written),
       coalesce((SELECT w.created FROM written w), false);
END
$$;

-- An agent declares the schedules of its code: always as a code declaration (source 'code',
-- no owner), so it never takes over a row the operator or the CLI owns; nor a job outside its
-- scope (cs_upsert_schedule).
CREATE OR REPLACE FUNCTION cs_declare_schedule_v2(p_spec jsonb)
RETURNS TABLE (source text, owner text, written boolean, created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
SELECT * FROM {schema}.cs_upsert_schedule(
    p_spec || jsonb_build_object('source', 'code', 'owner', NULL::text));
END
$$;

-- A manual or backfill occurrence for an agent to pick up (pending, attempt 0); none for a
-- job outside the caller's scope.
-- Called by: the operator and the CLI (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_request_runs(p_job_name text, p_fire_times timestamptz[],
                                           p_kind text)
RETURNS TABLE (id bigint, fire_time timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
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
  AND {schema}.cs_in_scope(p_job_name)
ON CONFLICT (job_name, fire_time) DO NOTHING
RETURNING job_runs.id, job_runs.fire_time;
END
$$;

-- A claimsched.io/trigger value asks for one manual run. The trigger's key is inserted with the
-- run, in one statement: whoever comes second with the same key (a retry after a crash, another
-- operator) inserts neither. `known`: the job has a row; `keyed`: the key is new (its fire time,
-- the database's now nudged off whole seconds, so never a scheduled occurrence's key);
-- `requested`: the run is new (NULL with a new key: the fire time was taken, roll back).
-- Called by: the operator and the CLI (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_trigger_run(p_job_name text, p_trigger_key text)
RETURNS TABLE (known boolean, keyed timestamptz, requested timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH job AS (  -- a job outside the caller's scope is as unknown
    SELECT s.job_name FROM job_schedule s
    WHERE s.job_name = p_job_name AND {schema}.cs_in_scope(p_job_name)
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

-- API 1: what the agents of claimsched 0.1.0 call, with that release's names, arguments and
-- result columns, each a thin wrapper over its API 2 version (SECURITY DEFINER too, so EXECUTE
-- on these alone suffices, as 0.1.0's `claimsched roles` granted it). Those agents never send
-- cs_complete the status 'fenced_out', and their housekeeping has no `next_expiry`.
-- Called by: agents of claimsched 0.1.0 (`claimsched roles`), until a later release drops
-- API 1 (migration 0017).
CREATE OR REPLACE FUNCTION cs_claim(
    p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamptz[],
    p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamptz[])
RETURNS TABLE (job_name text, fire_time timestamptz, outcome text, id bigint, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, notified boolean, db_now timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_claim_v2(p_agent_id, p_capacity, p_jobs, p_fire_times, p_wants,
                                   p_reasons, p_latest, p_since)
$$;

CREATE OR REPLACE FUNCTION cs_reclaim(p_agent_id text, p_jobs text[], p_capacity integer)
RETURNS TABLE (id bigint, job_name text, fire_time timestamptz, kind text, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               orphan_count integer,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, db_now timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_reclaim_v2(p_agent_id, p_jobs, p_capacity)
$$;

CREATE OR REPLACE FUNCTION cs_heartbeat(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_leases double precision[])
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_heartbeat_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                       p_lease_tokens, p_leases)
$$;

CREATE OR REPLACE FUNCTION cs_complete(
    p_agent_id text, p_ids bigint[], p_fire_times timestamptz[], p_attempts integer[],
    p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[],
    p_max_attempts integer[], p_backoffs double precision[])
RETURNS TABLE (id bigint, retry_at timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_complete_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                      p_lease_tokens, p_statuses, p_errors, p_retries,
                                      p_max_attempts, p_backoffs)
$$;

CREATE OR REPLACE FUNCTION cs_housekeeping(
    p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[],
    p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[])
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT h.present, h.orphaned, h.exhausted, h.overdue, h.claimable, h.notified, h.db_now,
       h.system_identifier, h.timeline, h.durability, h.joined, h.peers
FROM {schema}.cs_housekeeping_as(1, p_agent_id, p_hostname, p_pod, p_namespace, p_handlers,
                                 p_version, p_ttl_seconds, p_tzdata) AS h
$$;

CREATE OR REPLACE FUNCTION cs_release(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_release_v2(p_agent_id, p_ids, p_lease_tokens)
$$;

CREATE OR REPLACE FUNCTION cs_agent_stopped(p_agent_id text)
RETURNS TABLE (agent_id text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_agent_stopped_v2(p_agent_id)
$$;

CREATE OR REPLACE FUNCTION cs_effect(
    p_run_id bigint, p_fire_time timestamptz, p_agent_id text, p_attempt integer,
    p_lease_token uuid, p_entity text, p_job_name text)
RETURNS TABLE (owned boolean, inserted boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_effect_v2(p_run_id, p_fire_time, p_agent_id, p_attempt,
                                    p_lease_token, p_entity, p_job_name)
$$;

CREATE OR REPLACE FUNCTION cs_declare_schedule(p_spec jsonb)
RETURNS TABLE (source text, owner text, written boolean, created boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT * FROM {schema}.cs_declare_schedule_v2(p_spec)
$$;

-- The live agents that call version `p_api` of the agent API (agents.api), with their release:
-- what `claimsched migrate` says still uses each version it serves, and what must be gone
-- before a later release's migration may drop one.
-- Called by: the schema's owner (migrate; no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_api_callers(p_api integer)
RETURNS TABLE (agent_id text, version text)
LANGUAGE sql STABLE SET search_path = pg_catalog, {schema}, pg_temp AS $$
SELECT a.agent_id, a.version FROM agents a
WHERE a.api = p_api AND a.stopped_at IS NULL
  AND a.last_seen + make_interval(secs => a.ttl_seconds) > now()
ORDER BY a.agent_id
$$;

-- Nobody but the owner calls these until `claimsched roles` grants them, but for the roles
-- that could call a function before this file ran: a function dropped above, for a new
-- signature, is granted again to the callers of the one it replaces (by name), and each
-- version of an agent function (cs_<name>, cs_<name>_vN) to the callers of any version of it
-- (a function new in a version, to the callers of cs_housekeeping: every agent), so that a
-- migrate leaves the agents of both releases working before `claimsched roles`.
DO $$
DECLARE
    f regprocedure;
    grantee regrole;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    FOR f, grantee IN SELECT DISTINCT c.f, k.grantee
                      FROM pg_temp.cs_functions c
                      JOIN pg_temp.cs_callers k
                        ON k.name = CASE regexp_replace(c.name, '_v[0-9]+$', '')
                                    -- new in API 2: to every agent (all call housekeeping)
                                    WHEN 'cs_poll' THEN 'cs_housekeeping'
                                    ELSE regexp_replace(c.name, '_v[0-9]+$', '') END
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, grantee);
    END LOOP;
END
$$;
DROP VIEW pg_temp.cs_functions;
DROP TABLE pg_temp.cs_callers;
