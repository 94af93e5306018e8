-- 0014: the attempts of an occurrence that a later attempt superseded. A run's row holds its
-- current (or last) attempt only; when cs_reclaim takes a run over (attempt + 1), the attempt
-- it supersedes is kept here first: who ran it, when, and how it ended. An occurrence done at
-- its first attempt has no row here, so the hot path writes nothing more. Retention drops
-- these rows with their runs (maintain).

CREATE TABLE job_attempts (
    job_name text NOT NULL,                             -- the occurrence's job
    fire_time timestamptz NOT NULL,                     -- the occurrence
    attempt integer NOT NULL,                           -- the superseded attempt's number
    run_id bigint NOT NULL,                             -- job_runs.id
    claimed_by text,                                    -- the agent that held that attempt
    started_at timestamptz,                             -- when it started
    ended_at timestamptz,                               -- when it ended: finished or its lease
    outcome text NOT NULL
        CHECK (outcome IN ('orphaned', 'fenced_out', 'failed')),
                                                        -- orphaned: its lease expired;
                                                        -- fenced_out: it lost its lease and
                                                        -- gave the run back; failed: the
                                                        -- handler failed and was retried
    error text,                                         -- why, as the run's row said then
    PRIMARY KEY (job_name, fire_time, attempt)
);
