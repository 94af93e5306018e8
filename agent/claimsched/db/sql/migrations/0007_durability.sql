-- 0007: how durable a commit is on this database, as agents see it every housekeeping period.

-- Which database this is and what a failover can lose of an acknowledged commit. A failover
-- to a standby keeps the system identifier and starts a new timeline (read on the primary from
-- its current WAL file: the control file's checkpoint lags behind a promotion); another
-- cluster or a restore changes the identifier. durability: 'synchronous' (a standby confirms
-- each commit: nothing is lost), 'asynchronous' (standbys attached, none waited for: up to the
-- replication lag), 'standalone' (no standby PostgreSQL can see; a managed service may still
-- replicate its storage).
CREATE FUNCTION database_identity(OUT system_identifier text, OUT timeline integer,
                                  OUT durability text)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT c.system_identifier FROM pg_control_system() c)::text,
           CASE WHEN pg_is_in_recovery() THEN (SELECT c.timeline_id FROM pg_control_checkpoint() c)
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
           END,
           CASE WHEN current_setting('synchronous_standby_names') <> '' THEN 'synchronous'
                WHEN EXISTS (SELECT 1 FROM pg_stat_replication) THEN 'asynchronous'
                ELSE 'standalone'
           END
$$;

ALTER TABLE agents ADD COLUMN durability text;  -- database_identity()'s durability, last seen
