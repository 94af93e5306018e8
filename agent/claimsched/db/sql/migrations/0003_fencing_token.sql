-- The fence holds at commit: (id, fire_time, attempt) becomes a key of job_runs, so a receipt's
-- fence row lock (FOR KEY SHARE, held until the receipt commits) conflicts with exactly the
-- updates that change the fencing token (a reclaim, attempt + 1) and with no other (heartbeat,
-- reaper, completion). A reclaim skips a run whose receipt is still being written; in
-- REPEATABLE READ a receipt of a run reclaimed after the snapshot fails instead of passing.
ALTER TABLE job_runs ADD CONSTRAINT job_runs_id_fire_time_attempt_key
    UNIQUE (id, fire_time, attempt);
