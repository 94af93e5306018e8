-- The triggers job_schedule_notify_insert/_update/_delete (AFTER each statement on
-- job_schedule): agents wake up when schedules change, and read only the rows that did. The
-- notification on claimsched_schedule_names names them (`<job> <job> ...`, or `*` when they
-- would not fit in a notification), then a newline and the schema; claimsched_schedules
-- carries the schema alone (agents of API 1 listen there, and re-read every row). First
-- created by migration 0001.
CREATE OR REPLACE FUNCTION notify_schedule_change() RETURNS trigger LANGUAGE plpgsql AS $$
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
