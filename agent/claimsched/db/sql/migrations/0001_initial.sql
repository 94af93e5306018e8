-- 0001: the initial schema.

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
    updated_at timestamptz NOT NULL DEFAULT now()       -- last change (database clock)
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
    UNIQUE (job_name, fire_time)                        -- one row per occurrence: exactly once
) PARTITION BY RANGE (fire_time);

-- Rows whose month has no partition yet land here until maintenance moves them.
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT;

-- The reaper looks for expired leases; Forbid looks for a job's running run.
CREATE INDEX job_runs_running ON job_runs (job_name, lease_until) WHERE status = 'running';
-- Reclaim looks for runs that want an owner.
CREATE INDEX job_runs_claimable ON job_runs (job_name, fire_time)
    WHERE status IN ('pending', 'orphaned') OR retry_at IS NOT NULL;

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
    stopped_at timestamptz                              -- set on graceful shutdown
);

-- Agents wake up when schedules change, and when runs want an owner.
CREATE FUNCTION notify_schedule_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('claimsched_schedules', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
CREATE TRIGGER job_schedule_notify AFTER INSERT OR UPDATE OR DELETE ON job_schedule
    FOR EACH STATEMENT EXECUTE FUNCTION notify_schedule_change();

-- A schedule that resumes or changes starts afresh: no catch-up of what fell before.
CREATE FUNCTION schedule_active_since() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.enabled AND (NOT OLD.enabled OR NEW.schedule <> OLD.schedule
                        OR NEW.time_zone <> OLD.time_zone) THEN
        NEW.active_since := now();
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER job_schedule_active_since BEFORE UPDATE ON job_schedule
    FOR EACH ROW EXECUTE FUNCTION schedule_active_since();
