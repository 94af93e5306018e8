-- 0010: the operator's status finds a job's latest failed run in one index entry (the streak
-- of failures or successes is the runs newer than the latest run that ended the other way).

CREATE INDEX job_runs_failed ON job_runs (job_name, fire_time) WHERE status = 'failed';
