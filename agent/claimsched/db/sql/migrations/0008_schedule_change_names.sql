-- 0008: a schedule change names its rows, so that agents read only those.

DROP TRIGGER job_schedule_notify ON job_schedule;
DROP FUNCTION notify_schedule_change();

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
