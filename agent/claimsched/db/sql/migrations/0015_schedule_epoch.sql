-- 0015: schedule changes counted in commit order, for the agents that poll rather than LISTEN
-- (behind a pooler without a listen_dsn). updated_at is when a writer's transaction began: a
-- writer that began first and committed last left max(updated_at) and the count of rows as a
-- poll had already seen them, and its change unseen until the next full re-read.

CREATE TABLE schedule_epoch (
    single boolean PRIMARY KEY DEFAULT true CHECK (single),  -- one row
    epoch bigint NOT NULL DEFAULT 0,  -- +1 at the commit of each transaction that wrote schedules
    moved_by xid8                     -- the transaction that moved it last
);
INSERT INTO schedule_epoch DEFAULT VALUES;

-- Moves the epoch once per transaction that inserted, updated or deleted schedule rows, at its
-- commit (a deferred constraint trigger): the row is locked from there to the end of the
-- commit only, so writers wait for each other's commits, never for each other's transactions,
-- and take no lock after it (no deadlock); the epoch's committed values rise in commit order,
-- so every commit moves the value a poll reads. SECURITY DEFINER, with pg_catalog then
-- claimsched's schema in its search_path (as sql/functions.sql's): the operator's role writes
-- schedule columns but never this row, and a writer's own search_path need not name the schema.
DO $$
BEGIN
    EXECUTE format($function$
        CREATE FUNCTION count_schedule_change() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp AS $body$
        BEGIN
            UPDATE schedule_epoch SET epoch = epoch + 1, moved_by = pg_current_xact_id()
            WHERE moved_by IS DISTINCT FROM pg_current_xact_id();
            RETURN NULL;
        END
        $body$
    $function$, current_schema());
END
$$;
REVOKE ALL ON FUNCTION count_schedule_change() FROM PUBLIC;  -- a trigger's: nobody calls it
CREATE CONSTRAINT TRIGGER job_schedule_epoch AFTER INSERT OR UPDATE OR DELETE ON job_schedule
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION count_schedule_change();

-- Whoever may read the schedules (the roles of `claimsched roles`) may read their epoch: a
-- migrate leaves polling agents working before the roles are granted again.
DO $$
DECLARE
    grantee regrole;
BEGIN
    FOR grantee IN SELECT DISTINCT a.grantee::regrole
                   FROM pg_class c, aclexplode(c.relacl) a
                   WHERE c.oid = 'job_schedule'::regclass AND a.privilege_type = 'SELECT'
                     AND a.grantee NOT IN (0, c.relowner)
    LOOP
        EXECUTE format('GRANT SELECT ON schedule_epoch TO %s', grantee);
    END LOOP;
END
$$;
