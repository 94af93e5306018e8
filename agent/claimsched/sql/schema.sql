-- claimsched: the whole current schema, in one reviewed file.
-- The migration runner applies it to an empty schema; existing databases get migrations/*.sql.
-- A test proves that this file and the migration chain produce the same catalog.
-- Tables are created in the schema named by the connection's search_path (default `claimsched`).

-- Which migrations have been applied. Forward-only.
CREATE TABLE schema_version (
    version integer PRIMARY KEY,                        -- migration number (migrations/NNNN_*.sql)
    applied_at timestamptz NOT NULL DEFAULT now()       -- when it was applied (database clock)
);

-- One row per job: what to run and when. Written by the operator, the CLI or code declarations.
CREATE TABLE job_schedule (
    job_name text PRIMARY KEY
        CHECK (job_name ~ '^[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?$'),  -- the job's key
    schedule text NOT NULL,                             -- 5-field cron, @daily..., or @every <duration>
    time_zone text NOT NULL DEFAULT 'UTC',              -- IANA zone the cron fields are read in
    enabled boolean NOT NULL DEFAULT true,              -- false: suspended, or deleted by the operator
    lease_seconds integer NOT NULL DEFAULT 120
        CHECK (lease_seconds BETWEEN 1 AND 86400),      -- how long a claim is valid without renewal
    heartbeat_seconds integer NOT NULL DEFAULT 30
        CHECK (heartbeat_seconds >= 1 AND heartbeat_seconds * 3 <= greatest(lease_seconds, 3)),
                                                        -- how often the owner renews the lease
    max_attempts integer NOT NULL DEFAULT 3
        CHECK (max_attempts BETWEEN 1 AND 100),         -- attempts per occurrence (orphans, retries)
    retry_on_failure boolean NOT NULL DEFAULT false,    -- retry a handler exception with backoff
    concurrency_policy text NOT NULL DEFAULT 'Forbid'
        CHECK (concurrency_policy IN ('Forbid', 'Allow', 'Replace')),
    catch_up_window_seconds integer NOT NULL DEFAULT 3600
        CHECK (catch_up_window_seconds BETWEEN 0 AND 2678400),  -- how far back missed runs are claimed
    catch_up_policy text NOT NULL DEFAULT 'Latest'
        CHECK (catch_up_policy IN ('All', 'Latest', 'None')),
    max_runtime_seconds integer
        CHECK (max_runtime_seconds IS NULL OR max_runtime_seconds >= 1),  -- fence out longer runs
    source text NOT NULL DEFAULT 'code'
        CHECK (source IN ('operator', 'code', 'cli')),  -- who declared the schedule
    owner text,                                         -- namespace/name of the ClaimSchedule, if any
    active_since timestamptz NOT NULL DEFAULT now(),    -- occurrences at or before this never run
                                                        -- (set on create, resume, schedule change)
    updated_at timestamptz NOT NULL DEFAULT now(),      -- last change (database clock)
    suspend_reason text
        CHECK (length(suspend_reason) <= 1024),         -- why it is suspended (people read it)
    suspend_until timestamptz                           -- suspended until then: occurrences at or
                                                        -- before it never run; resumes by itself
);

-- Every occurrence that was claimed, skipped or requested: the claim table.
CREATE TABLE job_runs (
    id bigint GENERATED ALWAYS AS IDENTITY,             -- the run's id (with fire_time: the key)
    job_name text NOT NULL,                             -- job_schedule.job_name
    fire_time timestamptz NOT NULL,                     -- the occurrence (UTC instant)
    kind text NOT NULL DEFAULT 'scheduled'
        CHECK (kind IN ('scheduled', 'manual', 'backfill')),  -- how the occurrence came to be
    status text NOT NULL
        CHECK (status IN ('pending', 'running', 'done', 'failed', 'orphaned', 'skipped')),
                                                        -- pending: manual/backfill, not started yet
    claimed_by text,                                    -- agent_id of the current or last owner
    lease_until timestamptz,                            -- the owner's lease (database clock)
    attempt integer NOT NULL DEFAULT 1
        CHECK (attempt >= 0),                           -- fencing token; +1 on every (re)claim
    started_at timestamptz,                             -- when the current attempt started
    finished_at timestamptz,                            -- when it ended (done, failed, skipped)
    error text,                                         -- failure, orphaning or skip reason
    orphan_count integer NOT NULL DEFAULT 0,            -- how often a lease expired on this run
    retry_at timestamptz,                               -- failed, to be retried at this time
    PRIMARY KEY (id, fire_time),
    UNIQUE (job_name, fire_time),                       -- one row per occurrence: exactly once
    UNIQUE (id, fire_time, attempt)                     -- the fencing token is a key: a receipt
                                                        -- locks it FOR KEY SHARE until it commits
) PARTITION BY RANGE (fire_time);

-- Rows whose month has no partition yet land here until maintenance moves them.
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT;

-- The reaper looks for expired leases; Forbid looks for a job's running run.
CREATE INDEX job_runs_running ON job_runs (job_name, lease_until) WHERE status = 'running';
-- Reclaim looks for runs that want an owner.
CREATE INDEX job_runs_claimable ON job_runs (job_name, fire_time)
    WHERE status IN ('pending', 'orphaned') OR retry_at IS NOT NULL;
-- The operator's status looks for a job's latest failed run.
CREATE INDEX job_runs_failed ON job_runs (job_name, fire_time) WHERE status = 'failed';

-- Receipts that make side effects idempotent: one per (entity, job, occurrence).
CREATE TABLE job_effects (
    entity text NOT NULL,                               -- the caller's key of the side effect
    job_name text NOT NULL,                             -- the occurrence's job
    fire_time timestamptz NOT NULL,                     -- the occurrence
    run_id bigint NOT NULL,                             -- job_runs.id that recorded it
    attempt integer NOT NULL,                           -- the attempt that recorded it
    recorded_at timestamptz NOT NULL DEFAULT now(),     -- when (database clock)
    PRIMARY KEY (entity, job_name, fire_time)
);
CREATE INDEX job_effects_occurrence ON job_effects (job_name, fire_time);

-- The manual runs asked for by a ClaimSchedule's claimsched.io/trigger annotation: one row per
-- trigger key, written with its run and only once, so a value is one run however many operators
-- see it.
CREATE TABLE job_triggers (
    trigger_key text PRIMARY KEY,                       -- digest of the resource's uid and the value
    job_name text NOT NULL,                             -- the job the run was asked for
    fire_time timestamptz NOT NULL,                     -- the manual run's occurrence (job_runs)
    requested_at timestamptz NOT NULL DEFAULT now()     -- when (database clock)
);

-- Presence: which agents are alive and which handlers they have.
CREATE TABLE agents (
    agent_id text PRIMARY KEY,                          -- unique per agent process
    hostname text NOT NULL,                             -- host the agent runs on
    pod text,                                           -- Kubernetes pod name, if any
    namespace text,                                     -- Kubernetes namespace, if any
    handlers text[] NOT NULL DEFAULT '{}',              -- job names this agent can run
    version text NOT NULL,                              -- claimsched version
    started_at timestamptz NOT NULL DEFAULT now(),      -- when the agent started
    last_seen timestamptz NOT NULL DEFAULT now(),       -- last sign of life (database clock)
    ttl_seconds integer NOT NULL DEFAULT 90,            -- alive while last_seen + ttl > now()
    stopped_at timestamptz,                             -- set on graceful shutdown
    tzdata text,                                        -- IANA tz database version (2025b)
    durability text                                     -- database_identity()'s durability, last seen
);

-- Which database this is and what a failover can lose of an acknowledged commit. A failover
-- to a standby keeps the system identifier and starts a new timeline (read on the primary from
-- its current WAL file: the control file's checkpoint lags behind a promotion); another
-- cluster or a restore changes the identifier. durability: 'synchronous' (a standby confirms
-- each commit: nothing is lost), 'asynchronous' (standbys attached, none waited for: up to the
-- replication lag), 'standalone' (no standby PostgreSQL can see; a managed service may still
-- replicate its storage).
CREATE FUNCTION database_identity(OUT system_identifier text, OUT timeline integer,
                                  OUT durability text)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT c.system_identifier FROM pg_control_system() c)::text,
           CASE WHEN pg_is_in_recovery() THEN (SELECT c.timeline_id FROM pg_control_checkpoint() c)
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
           END,
           CASE WHEN current_setting('synchronous_standby_names') <> '' THEN 'synchronous'
                WHEN EXISTS (SELECT 1 FROM pg_stat_replication) THEN 'asynchronous'
                ELSE 'standalone'
           END
$$;

-- Agents wake up when schedules change, and read only the rows that did: the notification on
-- claimsched_schedule_names names them (`<job> <job> ...`, or `*` when they would not fit in
-- a notification), then a newline and the schema. Agents before 0008 listen on
-- claimsched_schedules for the schema alone, and re-read every row.
CREATE FUNCTION notify_schedule_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    names text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT string_agg(job_name, ' ') INTO names FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT string_agg(job_name, ' ') INTO names FROM old_rows;
    ELSE
        SELECT string_agg(job_name, ' ') INTO names
        FROM (SELECT job_name FROM new_rows UNION SELECT job_name FROM old_rows) AS changed;
    END IF;
    IF names IS NULL THEN
        RETURN NULL;  -- no row changed
    END IF;
    IF octet_length(names) + octet_length(TG_TABLE_SCHEMA) > 7900 THEN
        names := '*';  -- a notification holds at most 8000 bytes
    END IF;
    PERFORM pg_notify('claimsched_schedule_names', names || E'\n' || TG_TABLE_SCHEMA);
    PERFORM pg_notify('claimsched_schedules', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
CREATE TRIGGER job_schedule_notify_insert AFTER INSERT ON job_schedule
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notify_schedule_change();
CREATE TRIGGER job_schedule_notify_update AFTER UPDATE ON job_schedule
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notify_schedule_change();
CREATE TRIGGER job_schedule_notify_delete AFTER DELETE ON job_schedule
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION notify_schedule_change();

-- A schedule that resumes or changes starts afresh: no catch-up of what fell before. The part of
-- a suspension (suspend_until) that has passed when it is shortened, lifted or replaced is kept
-- in active_since, so lifting it early never makes what fell in it due.
CREATE FUNCTION schedule_active_since() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.enabled AND (NOT OLD.enabled OR NEW.schedule <> OLD.schedule
                        OR NEW.time_zone <> OLD.time_zone) THEN
        NEW.active_since := now();
    END IF;
    IF OLD.suspend_until IS NOT NULL
       AND OLD.suspend_until IS DISTINCT FROM NEW.suspend_until THEN
        NEW.active_since := greatest(NEW.active_since, least(OLD.suspend_until, now()));
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER job_schedule_active_since BEFORE UPDATE ON job_schedule
    FOR EACH ROW EXECUTE FUNCTION schedule_active_since();

-- concurrencyPolicy Forbid: at most one run of a job in progress (running, whatever its lease,
-- or orphaned and awaiting reclaim). Claim and reclaim call this for their Forbid jobs only:
-- it locks those jobs' schedule rows (in job order, so concurrent callers never deadlock) and
-- then returns their runs in progress. Being VOLATILE, its query reads what had committed when
-- the locks were granted, not the calling statement's older snapshot: of two statements that
-- start runs of one job at once, the second waits for the first to commit and then sees its run.
CREATE FUNCTION forbid_in_progress(jobs text[])
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
