-- The trigger job_schedule_epoch (a deferred constraint trigger, each row): moves
-- schedule_epoch once per transaction that inserted, updated or deleted schedule rows, at its
-- commit. The row is locked from there to the end of the commit only, so writers wait for each
-- other's commits, never for each other's transactions, and take no lock after it (no
-- deadlock); the epoch's committed values rise in commit order, so every commit moves the value
-- a poll reads. SECURITY DEFINER: the operator's role writes schedule columns but never this
-- row, and a writer's own search_path need not name the schema. No grant: a trigger's.
-- First created by migration 0015.
CREATE OR REPLACE FUNCTION count_schedule_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE schedule_epoch SET epoch = epoch + 1, moved_by = pg_current_xact_id()
    WHERE moved_by IS DISTINCT FROM pg_current_xact_id();
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION count_schedule_change() FROM PUBLIC;
