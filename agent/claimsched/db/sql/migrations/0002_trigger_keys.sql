-- 0002: the manual runs asked for by a ClaimSchedule's claimsched.io/trigger annotation, one
-- row per trigger key, so a trigger value is turned into one run however many operators see it.

-- One row per trigger: its key is written with its run, and only once.
CREATE TABLE job_triggers (
    trigger_key text PRIMARY KEY,                       -- digest of the resource's uid and the value
    job_name text NOT NULL,                             -- the job the run was asked for
    fire_time timestamptz NOT NULL,                     -- the manual run's occurrence (job_runs)
    requested_at timestamptz NOT NULL DEFAULT now()     -- when (database clock)
);
