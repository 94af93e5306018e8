-- Named queries. Each starts with `-- name: <name>`, then a description line, then the body.
-- Parameters are %(name)s; nothing is ever formatted into a statement. A statement that only
-- calls one of sql/functions/ is not written here: claimsched.db.queries.call makes it from the
-- function's signature (SELECT * FROM cs_claim_v2(%(agent_id)s::text, ...)).

-- name: db_now
-- The database clock, used to measure this replica's offset.
SELECT clock_timestamp() AS db_now

-- name: session_settings
-- What every claimsched connection runs with: our schema first, no JIT (our statements are
-- short: compiling one cost more than running it), timeouts shorter than a lease, and commits
-- that wait at least for the primary's disk and, with synchronous replication, for a standby
-- (`on`), whatever the server's default. `local` sets them for the current transaction only
-- (behind a pooler in transaction mode), otherwise for the session. `read_only`: whether the
-- server refuses writes (a standby, or default_transaction_read_only): asked of the server itself,
-- never of the parameters a pooler repeats.
SELECT set_config('search_path', %(search_path)s, %(local)s),
       set_config('jit', 'off', %(local)s),
       set_config('statement_timeout', %(statement_timeout)s, %(local)s),
       set_config('lock_timeout', %(lock_timeout)s, %(local)s),
       set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, %(local)s),
       set_config('synchronous_commit',
                  CASE WHEN current_setting('synchronous_commit') IN ('off', 'local',
                                                                     'remote_write')
                       THEN 'on' ELSE current_setting('synchronous_commit') END,
                  %(local)s),
       current_setting('transaction_read_only') = 'on' AS read_only

-- name: app_transaction_settings
-- A receipt written in the app's transaction: that commit waits as ours do (at least `on`),
-- and the server ends the transaction if it stays idle longer than %(ms)s milliseconds (a
-- lease): it holds the run's fencing token until it ends.
SELECT set_config('synchronous_commit',
                  CASE WHEN current_setting('synchronous_commit') IN ('off', 'local',
                                                                     'remote_write')
                       THEN 'on' ELSE current_setting('synchronous_commit') END,
                  true),
       set_config('idle_in_transaction_session_timeout', %(ms)s, true)

-- name: current_database
-- The database connected to (`claimsched roles` grants CONNECT on it).
SELECT current_database()

-- name: replace_agent_scope
-- `claimsched roles --jobs` / `--jobs-like` / `--all-jobs`: the agent role acts for exactly the
-- jobs these LIKE patterns match (migration 0011; an exact name comes escaped); no pattern: for
-- every job.
WITH gone AS (
    DELETE FROM agent_scopes
    WHERE role = %(role)s AND NOT job_pattern = ANY(%(patterns)s::text[])
)
INSERT INTO agent_scopes (role, job_pattern)
SELECT %(role)s, p.pattern FROM unnest(%(patterns)s::text[]) AS p(pattern)
ON CONFLICT DO NOTHING

-- name: scoped_jobs
-- `claimsched roles`: the jobs with a schedule that a role's own scope matches today, one row
-- each; one row with a NULL job when its scope matches none; no row when it has no scope.
SELECT s.job_name
FROM (SELECT array_agg(a.job_pattern) AS patterns FROM agent_scopes a
      WHERE a.role = %(role)s) p
LEFT JOIN job_schedule s ON s.job_name LIKE ANY (p.patterns)
WHERE p.patterns IS NOT NULL
ORDER BY 1

-- name: schema_versions
-- Migrations already applied, oldest first.
SELECT version FROM schema_version ORDER BY version

-- name: serves_agent_api
-- Whether this schema serves a version of the agent API (migration 0017): an agent accepts a
-- schema newer than its release when it does.
SELECT EXISTS (SELECT 1 FROM agent_apis WHERE api = %(api)s) AS served

-- name: has_agent_apis
-- Whether the schema lists the versions of the agent API it serves (migration 0017 made the
-- table; an older schema served claimsched 0.1.0's functions only).
SELECT to_regclass('agent_apis') IS NOT NULL

-- name: served_agent_apis
-- The versions of the agent API this schema serves.
SELECT api FROM agent_apis

-- name: agent_api_callers
-- The versions of the agent API this schema serves, oldest first, each with the live agents
-- that call it (sql/functions/cs_api_callers.sql), one row per agent (agent NULL: none).
SELECT p.api, p.release, c.agent_id, c.version
FROM agent_apis p
LEFT JOIN LATERAL cs_api_callers(p.api) c ON true
ORDER BY p.api, c.agent_id

-- name: record_version
-- Mark a migration as applied.
INSERT INTO schema_version (version) VALUES (%(version)s) ON CONFLICT (version) DO NOTHING

-- name: schema_creators
-- Who besides the schema's owner may CREATE in it (granted directly; PUBLIC for everyone),
-- leaving out the owner's own members and superusers: anyone listed could put a function or
-- table where claimsched's SECURITY DEFINER functions look.
SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee
FROM pg_namespace n,
     aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
WHERE n.nspname = %(schema)s AND a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
  AND (a.grantee = 0 OR NOT (pg_has_role(a.grantee, n.nspowner, 'MEMBER')
                             OR (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = a.grantee)))
ORDER BY 1

-- name: schema_exists
-- Whether claimsched's tables exist in the current schema.
SELECT to_regclass('schema_version') IS NOT NULL AS present

-- name: claimsched_schemas
-- The schemas of this database that hold claimsched's tables (a wrong --schema says which).
SELECT n.nspname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = 'schema_version' AND c.relkind = 'r'
  AND EXISTS (SELECT 1 FROM pg_class j WHERE j.relname = 'job_schedule'
              AND j.relnamespace = n.oid)
ORDER BY 1

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
-- it holds (every write sets it: a trigger of the migrations), whichever order their writers
-- committed in.
SELECT job_name, updated_at FROM job_schedule

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

-- name: unclaimed
-- Of these occurrences (parallel arrays), those no run row holds yet: a peer's check of the
-- occurrences handed to it once their first claimer had its turn (claims.Planner.checks).
-- Nothing is written or locked: the claim that may follow still decides. A probe per key
-- (OFFSET 0: a subplan per key, never a hash of job_runs); never prepared (claims.py's
-- read_unclaimed says why); only columns the agent's role may read.
SELECT k.job_name, k.fire_time
FROM unnest(%(jobs)s::text[], %(fire_times)s::timestamptz[]) AS k(job_name, fire_time)
WHERE NOT EXISTS (SELECT 1 FROM job_runs r
                  WHERE r.job_name = k.job_name AND r.fire_time = k.fire_time OFFSET 0)

-- name: set_local_search_path
-- Point unqualified names at claimsched's schema until the current transaction ends.
SELECT set_config('search_path', %(search_path)s, true)

-- name: bound_idle_transaction
-- End this transaction (server side) if it stays idle longer than %(ms)s milliseconds.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true)

-- name: schedule_exists
-- Whether a job has a schedule (manual runs need one).
SELECT 1 FROM job_schedule WHERE job_name = %(job_name)s

-- name: queued_runs
-- Where these runs (keys as parallel arrays) stand for whoever waits for them (trigger and
-- backfill --wait), in the order given: `state` is 'done', 'running', 'pending' while an owner
-- will still take the run (pending, orphaned, failed with a retry to come: what cs_reclaim
-- takes), 'failed' for good (failed with no retry to come, or skipped), or 'gone' (no row).
SELECT k.id, k.fire_time, r.status, r.attempt, r.error,
       CASE WHEN r.id IS NULL THEN 'gone'
            WHEN r.status IN ('done', 'running', 'pending') THEN r.status
            WHEN r.status = 'orphaned' OR (r.status = 'failed' AND r.retry_at IS NOT NULL)
                THEN 'pending'
            ELSE 'failed' END AS state
FROM unnest(%(ids)s::bigint[], %(fire_times)s::timestamptz[]) WITH ORDINALITY
     AS k(id, fire_time, ord)
LEFT JOIN job_runs r ON r.id = k.id AND r.fire_time = k.fire_time
ORDER BY k.ord

-- name: wake_agents
-- Tell listening agents that runs want an owner.
SELECT pg_notify('claimsched_runs', current_schema())

-- name: list_runs
-- Recent runs, newest first, optionally for one job and/or one status; each with the attempts
-- a later one superseded (job_attempts, oldest first; the run's row is its last attempt).
SELECT r.id, r.job_name, r.fire_time, r.kind, r.status, r.claimed_by, r.attempt, r.started_at,
       r.finished_at, r.lease_until, r.orphan_count, r.retry_at, r.error,
       coalesce(h.attempts, '[]') AS superseded
FROM job_runs r
LEFT JOIN LATERAL (
    SELECT json_agg(json_build_object(
               'attempt', a.attempt, 'claimed_by', a.claimed_by, 'started_at', a.started_at,
               'ended_at', a.ended_at, 'outcome', a.outcome, 'error', a.error)
           ORDER BY a.attempt) AS attempts
    FROM job_attempts a WHERE a.job_name = r.job_name AND a.fire_time = r.fire_time
) h ON true
WHERE (%(job_name)s::text IS NULL OR r.job_name = %(job_name)s)
  AND (%(status)s::text IS NULL OR r.status = %(status)s)
ORDER BY r.fire_time DESC, r.id DESC
LIMIT %(limit)s

-- name: list_agents
-- Agents seen recently, and whether they are alive by their own time-to-live; `api` is the
-- version of the agent API each one calls (sql/functions/).
SELECT agent_id, hostname, pod, namespace, handlers, version, api, tzdata, started_at,
       last_seen, durability,
       agent_alive(stopped_at, last_seen, ttl_seconds) AS alive
FROM agents
ORDER BY last_seen DESC

-- name: forget_agents
-- Maintenance: drop presence rows of agents gone for a day.
DELETE FROM agents WHERE last_seen < now() - interval '1 day'

-- name: history_changed
-- Maintenance dropped or purged runs: counts of settled history kept by an operator are void
-- (migration 0013).
UPDATE history_epoch SET epoch = epoch + 1

-- name: expire_effects
-- Maintenance: drop receipts older than the retention period.
DELETE FROM job_effects WHERE fire_time < now() - make_interval(days => %(days)s)

-- name: expire_attempts
-- Maintenance: drop the history of attempts older than the retention period.
DELETE FROM job_attempts WHERE fire_time < now() - make_interval(days => %(days)s)

-- name: partitions
-- The monthly partitions of job_runs, with their bounds.
SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'job_runs'::regclass
ORDER BY c.relname
