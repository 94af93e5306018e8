-- The trigger job_schedule_active_since (BEFORE UPDATE ON job_schedule, each row): a schedule
-- that resumes or changes starts afresh, no catch-up of what fell before. The part of a
-- suspension (suspend_until) that has passed when it is shortened, lifted or replaced is kept
-- in active_since, so lifting it early never makes what fell in it due. updated_at is the
-- writer's transaction's start. First created by migration 0001.
CREATE OR REPLACE FUNCTION schedule_active_since() RETURNS trigger LANGUAGE plpgsql AS $$
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
