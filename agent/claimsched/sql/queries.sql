-- Named queries. Each starts with `-- name: <name>`, then a description line, then the body.
-- Parameters are %(name)s; nothing is ever formatted into a statement.

-- name: db_now
-- The database clock, used to measure this replica's offset.
SELECT clock_timestamp() AS db_now

-- name: session_settings
-- What every claimsched connection runs with: our schema first, no JIT (our statements are
-- short: compiling one cost more than running it), timeouts shorter than a lease, and commits
-- that wait at least for the primary's disk and, with synchronous replication, for a standby
-- (`on`), whatever the server's default. `local` sets them for the current transaction only
-- (behind a pooler in transaction mode), otherwise for the session.
SELECT set_config('search_path', %(search_path)s, %(local)s),
       set_config('jit', 'off', %(local)s),
       set_config('statement_timeout', %(statement_timeout)s, %(local)s),
       set_config('lock_timeout', %(lock_timeout)s, %(local)s),
       set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, %(local)s),
       set_config('synchronous_commit',
                  CASE WHEN current_setting('synchronous_commit') IN ('off', 'local',
                                                                     'remote_write')
                       THEN 'on' ELSE current_setting('synchronous_commit') END,
                  %(local)s)

-- name: set_local_synchronous_commit
-- A receipt written in the app's transaction: that commit waits as ours do (at least `on`).
SELECT set_config('synchronous_commit', 'on', true)
WHERE current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')

-- name: database_identity
-- Which database this is (system identifier, timeline) and how durable a commit is on it.
SELECT system_identifier, timeline, durability FROM database_identity()

-- name: poll
-- Behind a pooler without a listen_dsn: what NOTIFY would have said, asked every few seconds.
-- A fingerprint of the schedules, and whether a run this agent could take wants an owner.
SELECT (SELECT coalesce(max(updated_at)::text, '') || '/' || count(*) FROM job_schedule)
           AS schedules,
       EXISTS (SELECT 1 FROM job_runs r
               WHERE r.job_name = ANY(%(handlers)s::text[])
                 AND (r.status IN ('pending', 'orphaned')
                      OR (r.status = 'failed' AND r.retry_at <= now()))) AS claimable

-- name: schema_versions
-- Migrations already applied, oldest first.
SELECT version FROM schema_version ORDER BY version

-- name: record_version
-- Mark a migration as applied.
INSERT INTO schema_version (version) VALUES (%(version)s) ON CONFLICT (version) DO NOTHING

-- name: schema_exists
-- Whether claimsched's tables exist in the current schema.
SELECT to_regclass('schema_version') IS NOT NULL AS present

-- name: load_schedules
-- Every schedule, with the database's bookkeeping. {spec_columns} is the list in specs.py.
SELECT job_name, {spec_columns}, active_since, updated_at
FROM job_schedule
ORDER BY job_name

-- name: load_schedules_named
-- The named schedules (a change notification named them; a missing one is gone).
SELECT job_name, {spec_columns}, active_since, updated_at
FROM job_schedule
WHERE job_name = ANY (%(names)s::text[])

-- name: schedule_versions
-- Each schedule's last change: an agent re-reads only the rows whose updated_at is not the one
-- it holds (every write sets it, sql/schema.sql), whichever order their writers committed in.
SELECT job_name, updated_at FROM job_schedule

-- name: upsert_schedule
-- Create or replace a schedule; a job has one owner (claimsched.records.Written). Every writer (a
-- code declaration, the CLI, a ClaimSchedule through the operator) writes a new row, its own
-- row, or a row a ClaimSchedule released; the CLI also overrides a code declaration. Nothing
-- else: a refusal is never a silent takeover. A code declaration keeps the suspension of its
-- own row ({spec_upserted}: `claimsched suspend` / `resume` set it).
-- `source`/`owner`: the row's owner before the statement (NULL: no row); `written` whether
-- the row changed, `created` whether it is new.
WITH before AS (
    SELECT s.source, s.owner FROM job_schedule s WHERE s.job_name = %(job_name)s
), written AS (
    INSERT INTO job_schedule AS s (job_name, {spec_columns})
    VALUES (%(job_name)s, {spec_values})
    ON CONFLICT (job_name) DO UPDATE SET ({spec_columns}) = ROW({spec_upserted})
    WHERE (s.source = EXCLUDED.source AND s.owner IS NOT DISTINCT FROM EXCLUDED.owner
           OR s.source = 'operator' AND s.owner IS NULL
           OR s.source = 'code' AND EXCLUDED.source = 'cli')
      AND ROW({spec_current}) IS DISTINCT FROM ROW({spec_upserted})
    RETURNING (xmax = 0) AS created
)
SELECT (SELECT source FROM before) AS source,
       (SELECT owner FROM before) AS owner,
       EXISTS (SELECT 1 FROM written) AS written,
       coalesce((SELECT created FROM written), false) AS created

-- name: suspend_schedule
-- Suspend a schedule (`claimsched suspend`): until %(until)s when given (it then resumes by
-- itself; the row stays enabled and the claim skips what falls before it), else until resumed.
-- A row a ClaimSchedule owns is left alone: its spec decides. Returns the row as it is now.
UPDATE job_schedule
SET enabled = %(until)s::timestamptz IS NOT NULL, suspend_until = %(until)s,
    suspend_reason = %(reason)s
WHERE job_name = %(job_name)s AND (source <> 'operator' OR owner IS NULL)
RETURNING job_name, enabled, suspend_until, suspend_reason, updated_at

-- name: resume_schedule
-- Resume a suspended schedule (`claimsched resume`) from now on: nothing that fell while it
-- was suspended runs (the trigger moves active_since). A ClaimSchedule's row is left alone.
UPDATE job_schedule
SET enabled = true, suspend_until = NULL, suspend_reason = NULL
WHERE job_name = %(job_name)s AND (source <> 'operator' OR owner IS NULL)
RETURNING job_name, enabled, suspend_until, suspend_reason, updated_at

-- name: schedule_owner
-- Who declared a job's schedule, to say why it was left alone; no row: no schedule.
SELECT source, owner FROM job_schedule WHERE job_name = %(job_name)s

-- name: disable_schedule
-- Suspend a schedule for good (the operator's delete): history stays.
UPDATE job_schedule SET enabled = false WHERE job_name = %(job_name)s AND enabled
RETURNING job_name

-- name: claim
-- Claim due occurrences in one statement. Candidates come in as parallel arrays, in this
-- replica's preferred order; `want` is 'running' (run it) or 'skipped' (record why not, in
-- `reason`); `latest` marks a job's newest due occurrence. The database decides: not yet due by
-- its clock, schedule inactive, already taken, Forbid and busy (skip the latest, defer older
-- ones; of a Forbid job's free occurrences only the oldest may run now), or beyond this
-- replica's free slots, or computed from a schedule that has changed since (`since`, the
-- schedule's active_since when the replica read it: 'stale', the replica re-reads it).
-- Returns one row per candidate with its outcome,
-- plus the database clock (mid-statement); Replace fences out the job's older running runs.
-- Forbid's busy test is forbid_in_progress(), which locks the job first and reads after the
-- lock: a run that a racing claim or reclaim started is seen (it is called only when some
-- Forbid candidate may run, so claims of Allow and Replace jobs never pay for it).
-- Rows are inserted in one global order (job, fire time) so concurrent claims never deadlock.
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
               WHEN EXISTS (SELECT 1 FROM job_runs r
                            WHERE r.job_name = c.job_name AND r.fire_time = c.fire_time)
                   THEN 'taken'
               ELSE c.want
           END AS first_verdict
    FROM unnest(%(jobs)s::text[], %(fire_times)s::timestamptz[], %(wants)s::text[],
                %(reasons)s::text[], %(latest)s::boolean[], %(since)s::timestamptz[])
         WITH ORDINALITY AS c(job_name, fire_time, want, reason, latest, since, ord)
    LEFT JOIN job_schedule s ON s.job_name = c.job_name
),
busy AS (
    SELECT DISTINCT b.job_name
    FROM forbid_in_progress(ARRAY(SELECT DISTINCT job_name FROM cand
                                  WHERE first_verdict = 'running'
                                    AND concurrency_policy = 'Forbid')) AS b
),
decided AS (
    SELECT cand.*,
           CASE WHEN first_verdict <> 'running' OR concurrency_policy <> 'Forbid'
                    THEN first_verdict
                WHEN job_name IN (SELECT job_name FROM busy)
                    THEN CASE WHEN latest THEN 'busy' ELSE 'deferred' END
                WHEN row_number() OVER (PARTITION BY job_name, first_verdict
                                        ORDER BY fire_time) > 1
                    THEN 'deferred'
                ELSE first_verdict END AS verdict
    FROM cand
),
ranked AS (
    SELECT decided.*,
           row_number() OVER (PARTITION BY verdict = 'running' ORDER BY ord) AS slot
    FROM decided
),
chosen AS (
    SELECT * FROM ranked
    WHERE verdict IN ('skipped', 'busy') OR (verdict = 'running' AND slot <= %(capacity)s)
),
ins AS (
    INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, lease_until, attempt,
                          started_at, finished_at, error)
    SELECT job_name, fire_time, 'scheduled',
           CASE WHEN verdict = 'running' THEN 'running' ELSE 'skipped' END,
           %(agent_id)s,
           CASE WHEN verdict = 'running' THEN now() + make_interval(secs => lease_seconds) END,
           1, now(),
           CASE WHEN verdict = 'running' THEN NULL ELSE now() END,
           CASE WHEN verdict = 'busy'
                THEN 'skipped: the previous run is still running (concurrencyPolicy Forbid)'
                WHEN verdict = 'skipped' THEN reason END
    FROM chosen
    ORDER BY job_name, fire_time
    ON CONFLICT (job_name, fire_time) DO NOTHING
    RETURNING id, job_name, fire_time, status, attempt, lease_until, started_at
),
replaced AS (
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'replaced by the occurrence at ' || ins.fire_time || ' (concurrencyPolicy Replace)'
    FROM ins JOIN job_schedule rs ON rs.job_name = ins.job_name
    WHERE rs.concurrency_policy = 'Replace' AND ins.status = 'running'
      AND r.job_name = ins.job_name AND r.status = 'running' AND r.fire_time < ins.fire_time
    RETURNING r.id
)
SELECT c.job_name, c.fire_time,
       CASE WHEN i.id IS NOT NULL THEN
                CASE WHEN i.status = 'running' THEN 'claimed' ELSE 'skipped' END
            WHEN c.verdict = 'running' AND c.slot > %(capacity)s THEN 'no_capacity'
            WHEN c.verdict IN ('running', 'skipped', 'busy') THEN 'taken'
            ELSE c.verdict END AS outcome,
       i.id, i.attempt, i.lease_until, i.started_at,
       c.lease_seconds, c.heartbeat_seconds, c.max_attempts, c.retry_on_failure,
       CASE WHEN EXISTS (SELECT 1 FROM replaced)
            THEN pg_notify('claimsched_runs', current_schema()) END AS notified,
       now() + (clock_timestamp() - now()) / 2 AS db_now
FROM (SELECT now()) AS clock
LEFT JOIN ranked c ON true
LEFT JOIN ins i ON i.job_name = c.job_name AND i.fire_time = c.fire_time
ORDER BY c.ord

-- name: reclaim
-- Take over runs that want an owner: manual/backfill requests (pending) whose fire time has
-- come, orphans (first: they are runs in progress), and failed runs whose retry is due.
-- attempt + 1 is the new fencing token. A Forbid job starts at most one run, and none while
-- another of its runs is in progress (read by forbid_in_progress(), after its lock); an
-- orphan yields only to a running run or an older orphan.
WITH picked AS (
    SELECT r.id, r.job_name, r.fire_time, r.status
    FROM job_runs r
    WHERE r.job_name = ANY(%(jobs)s::text[])
      AND ((r.status = 'pending' AND r.fire_time <= now()) OR r.status = 'orphaned'
           OR (r.status = 'failed' AND r.retry_at <= now()))
    ORDER BY r.status = 'orphaned' DESC, r.fire_time
    LIMIT %(capacity)s
    FOR UPDATE OF r SKIP LOCKED
),
forbid AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.job_name
                                   ORDER BY p.status = 'orphaned' DESC, p.fire_time) AS nth
    FROM picked p JOIN job_schedule s ON s.job_name = p.job_name
    WHERE s.concurrency_policy = 'Forbid'
),
busy AS (
    SELECT * FROM forbid_in_progress(ARRAY(SELECT DISTINCT job_name FROM forbid))
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
)
UPDATE job_runs r
SET status = 'running', attempt = r.attempt + 1, claimed_by = %(agent_id)s,
    lease_until = now() + make_interval(secs => s.lease_seconds), started_at = now(),
    finished_at = NULL, retry_at = NULL
FROM taken, job_schedule s
WHERE r.id = taken.id AND r.fire_time = taken.fire_time AND s.job_name = r.job_name
RETURNING r.id, r.job_name, r.fire_time, r.kind, r.attempt, r.lease_until, r.started_at,
          r.orphan_count, s.lease_seconds, s.heartbeat_seconds, s.max_attempts,
          s.retry_on_failure, now() AS db_now

-- name: heartbeat
-- Renew the leases this agent still owns, all in one statement; a missing id is a lost lease.
UPDATE job_runs r
SET lease_until = now() + make_interval(secs => h.lease_seconds)
FROM unnest(%(ids)s::bigint[], %(fire_times)s::timestamptz[], %(attempts)s::integer[],
            %(leases)s::double precision[]) AS h(id, fire_time, attempt, lease_seconds)
WHERE r.id = h.id AND r.fire_time = h.fire_time AND r.attempt = h.attempt
  AND r.claimed_by = %(agent_id)s AND r.status = 'running' AND r.lease_until > now()
RETURNING r.id

-- name: complete
-- Record the outcome of finished runs (batched), fenced by owner and attempt (the fencing
-- token). The lease need not be alive: a handler that finished while the database was away
-- longer than its lease is recorded if nobody took the run over meanwhile (still running, or
-- orphaned by the reaper but not reclaimed: a reclaim sets a new owner and attempt). A run
-- fenced out for good (failed: max_runtime, Replace, attempts exhausted) stays as it is.
-- A failure is retried later when its job allows it and attempts remain.
UPDATE job_runs r
SET status = c.status, finished_at = now(), error = c.error, lease_until = now(),
    retry_at = CASE WHEN c.status = 'failed' AND c.retry AND r.attempt < c.max_attempts
                    THEN now() + make_interval(secs => c.backoff) END
FROM unnest(%(ids)s::bigint[], %(fire_times)s::timestamptz[], %(attempts)s::integer[],
            %(statuses)s::text[], %(errors)s::text[], %(retries)s::boolean[],
            %(max_attempts)s::integer[], %(backoffs)s::double precision[])
     AS c(id, fire_time, attempt, status, error, retry, max_attempts, backoff)
WHERE r.id = c.id AND r.fire_time = c.fire_time AND r.attempt = c.attempt
  AND r.claimed_by = %(agent_id)s AND r.status IN ('running', 'orphaned')
RETURNING r.id, r.retry_at

-- name: housekeeping
-- One cheap statement every few seconds from every agent: refresh presence, turn expired
-- leases into orphans (or failures once attempts are exhausted), fail runs past max_runtime,
-- and say whether any run this agent could take wants an owner. Wakes the others if needed.
-- Also how durable commits are now, for the agent's metric and `agents`.
WITH presence AS (
    INSERT INTO agents (agent_id, hostname, pod, namespace, handlers, version, ttl_seconds,
                        tzdata, durability)
    VALUES (%(agent_id)s, %(hostname)s, %(pod)s, %(namespace)s, %(handlers)s::text[],
            %(version)s, %(ttl_seconds)s, %(tzdata)s, (SELECT durability FROM database_identity()))
    ON CONFLICT (agent_id) DO UPDATE
    SET last_seen = now(), handlers = EXCLUDED.handlers, ttl_seconds = EXCLUDED.ttl_seconds,
        stopped_at = NULL, durability = EXCLUDED.durability
    RETURNING agent_id
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
overdue AS (
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'max_runtime of ' || s.max_runtime_seconds || ' s exceeded'
    FROM job_schedule s
    WHERE s.job_name = r.job_name AND r.status = 'running' AND r.lease_until >= now()
      AND s.max_runtime_seconds IS NOT NULL
      AND r.started_at + make_interval(secs => s.max_runtime_seconds) < now()
    RETURNING r.id
)
SELECT (SELECT count(*) FROM presence) AS present,
       (SELECT count(*) FROM expired WHERE status = 'orphaned') AS orphaned,
       (SELECT count(*) FROM expired WHERE status = 'failed') AS exhausted,
       (SELECT count(*) FROM overdue) AS overdue,
       EXISTS (SELECT 1 FROM job_runs r
               WHERE r.job_name = ANY(%(handlers)s::text[])
                 AND ((r.status = 'pending' AND r.fire_time <= now()) OR r.status = 'orphaned'
                      OR (r.status = 'failed' AND r.retry_at <= now())))
       OR EXISTS (SELECT 1 FROM expired
                  WHERE status = 'orphaned' AND job_name = ANY(%(handlers)s::text[]))
           AS claimable,
       CASE WHEN EXISTS (SELECT 1 FROM expired WHERE status = 'orphaned')
            THEN pg_notify('claimsched_runs', current_schema()) END AS notified,
       now() AS db_now,
       i.system_identifier, i.timeline, i.durability
FROM database_identity() i

-- name: release
-- Graceful shutdown: end this agent's leases now, so the next housekeeping orphans them.
UPDATE job_runs SET lease_until = now() - interval '1 microsecond'
WHERE claimed_by = %(agent_id)s AND status = 'running'
  AND id = ANY(%(ids)s::bigint[])
RETURNING id

-- name: agent_stopped
-- Graceful shutdown: this agent is gone.
UPDATE agents SET stopped_at = now(), last_seen = now() WHERE agent_id = %(agent_id)s

-- name: effect
-- Record a side effect's receipt if this run still owns its occurrence. `owned` false means
-- the lease was lost (fenced); `inserted` false means the receipt already existed.
-- The fence row stays locked FOR KEY SHARE until the receipt's transaction ends: no reclaim
-- (attempt + 1, a key update) can pass it meanwhile, so the fence holds at commit.
WITH fence AS (
    SELECT id, attempt FROM job_runs
    WHERE id = %(run_id)s AND fire_time = %(fire_time)s AND claimed_by = %(agent_id)s
      AND attempt = %(attempt)s AND status = 'running' AND lease_until > now()
    FOR KEY SHARE
),
ins AS (
    INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt)
    SELECT %(entity)s, %(job_name)s, %(fire_time)s, id, attempt FROM fence
    ON CONFLICT (entity, job_name, fire_time) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM ins) AS inserted

-- name: search_path
-- The session's search_path, to put back after a receipt written in the app's transaction.
SELECT current_setting('search_path')

-- name: set_local_search_path
-- Point unqualified names at claimsched's schema until the current transaction ends.
SELECT set_config('search_path', %(search_path)s, true)

-- name: bound_idle_transaction
-- End this transaction (server side) if it stays idle longer than %(ms)s milliseconds.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true)

-- name: schedule_exists
-- Whether a job has a schedule (manual runs need one).
SELECT 1 FROM job_schedule WHERE job_name = %(job_name)s

-- name: request_run
-- A manual or backfill occurrence for an agent to pick up (pending, attempt 0).
INSERT INTO job_runs (job_name, fire_time, kind, status, attempt)
SELECT s.job_name, f.fire_time, %(kind)s, 'pending', 0
FROM job_schedule s, unnest(%(fire_times)s::timestamptz[]) AS f(fire_time)
WHERE s.job_name = %(job_name)s
ON CONFLICT (job_name, fire_time) DO NOTHING
RETURNING id, fire_time

-- name: wake_agents
-- Tell listening agents that runs want an owner.
SELECT pg_notify('claimsched_runs', current_schema())

-- name: list_runs
-- Recent runs, newest first, optionally for one job and/or one status.
SELECT id, job_name, fire_time, kind, status, claimed_by, attempt, started_at, finished_at,
       lease_until, orphan_count, retry_at, error
FROM job_runs
WHERE (%(job_name)s::text IS NULL OR job_name = %(job_name)s)
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY fire_time DESC, id DESC
LIMIT %(limit)s

-- name: list_agents
-- Agents seen recently, and whether they are alive by their own time-to-live.
SELECT agent_id, hostname, pod, namespace, handlers, version, tzdata, started_at, last_seen,
       durability,
       (stopped_at IS NULL AND last_seen + make_interval(secs => ttl_seconds) > now()) AS alive
FROM agents
ORDER BY last_seen DESC

-- name: forget_agents
-- Maintenance: drop presence rows of agents gone for a day.
DELETE FROM agents WHERE last_seen < now() - interval '1 day'

-- name: expire_effects
-- Maintenance: drop receipts older than the retention period.
DELETE FROM job_effects WHERE fire_time < now() - make_interval(days => %(days)s)

-- name: partitions
-- The monthly partitions of job_runs, with their bounds.
SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'job_runs'::regclass
ORDER BY c.relname
