-- 0006: a suspension with a reason and an end. Occurrences at or before suspend_until never run
-- and are never caught up (the claim treats them like those before active_since), so a schedule
-- resumes by itself at that instant, with no misfire storm and nobody to flip it back.
ALTER TABLE job_schedule
    ADD COLUMN suspend_reason text CHECK (length(suspend_reason) <= 1024),
    ADD COLUMN suspend_until timestamptz;

-- A schedule that resumes or changes starts afresh: no catch-up of what fell before. The part of
-- a suspension (suspend_until) that has passed when it is shortened, lifted or replaced is kept
-- in active_since, so lifting it early never makes what fell in it due.
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
