-- claimsched: a least-privilege database role for the agents embedded in apps.
--
-- Agents only read and write rows: they claim occurrences, renew leases, record effects and
-- their presence, and upsert the schedules declared in code. They never change the schema:
-- migrations and maintenance (partitions, retention) run with the schema owner's role, from
-- the operator or `claimsched migrate` / `claimsched maintain`. Run agents with
-- CLAIMSCHED_MIGRATE=false.
--
-- Apply as the owner of claimsched's schema, in the app's database, after `claimsched migrate`:
--     psql "$OWNER_DSN" -f examples/sql/agent-role.sql
--     psql "$OWNER_DSN" -c "ALTER ROLE claimsched_agent PASSWORD '...'"
-- Idempotent: apply it again after upgrading claimsched (new tables get their grants).
-- Another schema than `claimsched` (CLAIMSCHED_SCHEMA)? Replace `claimsched.` below.
-- On PostgreSQL 13/14, also `REVOKE CREATE ON SCHEMA public FROM PUBLIC;` (15+ does this),
-- so that no role can create tables in `public` either.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'claimsched_agent') THEN
        CREATE ROLE claimsched_agent LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT
            NOREPLICATION NOBYPASSRLS;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO claimsched_agent', current_database());
END
$$;

-- Reach the tables, but create nothing in the schema (no CREATE).
GRANT USAGE ON SCHEMA claimsched TO claimsched_agent;

-- The schema version, checked at start (the agent refuses a schema it does not match).
GRANT SELECT ON claimsched.schema_version TO claimsched_agent;
-- Schedules: read all of them; upsert the ones declared in code (@agent.job(..., schedule=...)).
GRANT SELECT, INSERT, UPDATE ON claimsched.job_schedule TO claimsched_agent;
-- The claim table (its monthly partitions are reached through it): claim, renew, complete.
GRANT SELECT, INSERT, UPDATE ON claimsched.job_runs TO claimsched_agent;
-- Effect receipts: insert once, read back. Deleting old ones is maintenance.
GRANT SELECT, INSERT ON claimsched.job_effects TO claimsched_agent;
-- Presence: each agent inserts and refreshes its own row. Forgetting old agents is maintenance.
GRANT SELECT, INSERT, UPDATE ON claimsched.agents TO claimsched_agent;
