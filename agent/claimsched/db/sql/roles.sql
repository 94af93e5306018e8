-- claimsched's two database roles, created or brought up to date by `claimsched roles` (as the
-- owner of claimsched's schema, after `claimsched migrate`; again after each upgrade). Idempotent:
-- every privilege the roles had is revoked first, then exactly these are granted, in one
-- transaction. No password is ever set here: give one with ALTER ROLE ... PASSWORD, or log in
-- another way (certificates, a cloud IAM login, pg_hba).
-- The role names, the schema and the database are filled in as quoted names; `agent_name` and
-- `operator_name` are the role names as text.
--
-- The agent role (apps' agents): reads schedules, and writes only through the fenced SECURITY
-- DEFINER functions of sql/functions/ (claim, reclaim, heartbeat, complete, release, effect
-- receipts, housekeeping, presence, code declarations). No INSERT, UPDATE or DELETE on any table.
-- Ownership of a run is proven by the agent id the run was claimed with, its fencing token
-- (id, fire_time, attempt) and its lease token, a secret each claim returns to its claimer
-- only. The agent role may read none of them: neither the runs' claimed_by, id, attempt,
-- lease_token or error (which names the owner of an expired lease) nor the agents table. Agent
-- ids and fencing tokens also show in logs and statuses; the lease token never does, so an
-- agent sharing this role cannot pass itself off as another's run's owner. What it may read of
-- job_runs is what its poll for claimable runs needs.
-- Its scope, the jobs it may act for (agent_scopes, migration 0011), is set apart from this file
-- (the replace_agent_scope query, `claimsched roles --jobs`); this file leaves it as it is.
--
-- The operator role (the Kubernetes operator, the CLI, the web view): reads everything but
-- lease tokens (it has no use for them; what it reads shows in statuses and pages), writes
-- schedules (through cs_upsert_schedule, and the columns that suspend, resume, disable and
-- release a row), and asks for manual and backfill runs through cs_request_runs and
-- cs_trigger_run. It writes no run, receipt or presence row itself. Migrations and maintenance
-- (partitions, retention) stay with the schema's owner.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {agent_name}) THEN
        CREATE ROLE {agent} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION
            NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {operator_name}) THEN
        CREATE ROLE {operator} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION
            NOBYPASSRLS;
    END IF;
END
$$;

GRANT CONNECT ON DATABASE {database} TO {agent}, {operator};

-- Start from nothing: what an older claimsched (its examples/sql/agent-role.sql) granted goes.
REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {agent}, {operator};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {agent}, {operator};
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {schema} FROM {agent}, {operator};
REVOKE ALL ON SCHEMA {schema} FROM {agent}, {operator};
-- Reach the schema's objects; create nothing in it (no CREATE).
GRANT USAGE ON SCHEMA {schema} TO {agent}, {operator};

-- The agent: the schema version (checked at start), the schedules and their epoch, the columns
-- of job_runs its poll reads, which database this is; every write through a function.
GRANT SELECT ON {schema}.schema_version, {schema}.job_schedule, {schema}.schedule_epoch
    TO {agent};
GRANT SELECT (job_name, fire_time, kind, status, retry_at) ON {schema}.job_runs TO {agent};
GRANT EXECUTE ON FUNCTION
    {schema}.database_identity(),
    {schema}.cs_claim(text, integer, text[], timestamptz[], text[], text[], boolean[],
                      timestamptz[]),
    {schema}.cs_reclaim(text, text[], integer),
    {schema}.cs_heartbeat(text, bigint[], timestamptz[], integer[], uuid[],
                          double precision[]),
    {schema}.cs_complete(text, bigint[], timestamptz[], integer[], uuid[], text[], text[],
                         boolean[], integer[], double precision[]),
    {schema}.cs_housekeeping(text, text, text, text, text[], text, integer, text),
    {schema}.cs_release(text, bigint[], uuid[]),
    {schema}.cs_agent_stopped(text),
    {schema}.cs_effect(bigint, timestamptz, text, integer, uuid, text, text),
    {schema}.cs_declare_schedule(jsonb)
TO {agent};
-- The agent API in each version this schema serves (sql/functions/): API 1 above, for the
-- agents of claimsched 0.1.0 during a rolling upgrade; API 2 here, for this release's.
GRANT EXECUTE ON FUNCTION
    {schema}.cs_claim_v2(text, integer, text[], timestamptz[], text[], text[], boolean[],
                         timestamptz[]),
    {schema}.cs_reclaim_v2(text, text[], integer),
    {schema}.cs_heartbeat_v2(text, bigint[], timestamptz[], integer[], uuid[],
                             double precision[]),
    {schema}.cs_complete_v2(text, bigint[], timestamptz[], integer[], uuid[], text[], text[],
                            boolean[], integer[], double precision[]),
    {schema}.cs_housekeeping_v2(text, text, text, text, text[], text, integer, text),
    {schema}.cs_release_v2(text, bigint[], uuid[]),
    {schema}.cs_agent_stopped_v2(text),
    {schema}.cs_effect_v2(bigint, timestamptz, text, integer, uuid, text, text),
    {schema}.cs_declare_schedule_v2(jsonb),
    {schema}.cs_poll_v2(text)
TO {agent};

-- The operator: reads everything (status, `claimsched runs`, the web view); schedules and
-- requested runs through functions; suspend, resume, disable and release as plain UPDATEs of
-- the columns they set.
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {operator};
-- ... but not job_runs.lease_token: every other column of job_runs, none of its partitions
-- (a query reads them through job_runs, which is checked alone).
DO $$
DECLARE
    part regclass;
BEGIN
    EXECUTE format('REVOKE SELECT ON job_runs FROM %I', {operator_name});
    EXECUTE format('GRANT SELECT (%s) ON job_runs TO %I',
                   (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
                    FROM pg_attribute a
                    WHERE a.attrelid = 'job_runs'::regclass AND a.attnum > 0
                      AND NOT a.attisdropped AND a.attname <> 'lease_token'),
                   {operator_name});
    FOR part IN SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'job_runs'::regclass
    LOOP
        EXECUTE format('REVOKE SELECT ON %s FROM %I', part, {operator_name});
    END LOOP;
END
$$;
GRANT UPDATE (enabled, owner, suspend_until, suspend_reason) ON {schema}.job_schedule
    TO {operator};
GRANT EXECUTE ON FUNCTION
    {schema}.database_identity(),
    {schema}.cs_upsert_schedule(jsonb),
    {schema}.cs_request_runs(text, timestamptz[], text),
    {schema}.cs_trigger_run(text, text)
TO {operator};
