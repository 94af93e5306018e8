-- claimsched: the functions through which agents (and the operator, for runs) write. Code, not
-- schema: `claimsched migrate` applies these files again, with CREATE OR REPLACE, inside its
-- migration-lock transaction, after the schema and its migrations. Change a statement here and
-- re-run migrate; no migration needed. (The functions agents call never change their arguments
-- or result columns: see the API versions below. For any other, such a change needs a DROP of
-- the old version first, below. A dropped function loses its grants: this file
-- grants the new one again, at its end, to every role that could call the one of the same name
-- before, so a migrate leaves agents working; a new function waits for `claimsched roles`.)
--
-- Every function is SECURITY DEFINER: it runs with the rights of the role that ran migrate (the
-- schema's owner), so the roles of `claimsched roles` write nothing but through these fenced
-- statements. Each one fixes its search_path: pg_catalog first, so that no function or operator
-- of another schema can stand in for a built-in one (gen_random_uuid(), now(), =), then
-- claimsched's schema (only its owner may create objects in it: migrate and roles refuse a
-- schema where anyone else may), then pg_temp, last, so that no caller's temporary table or
-- function can stand in for ours. Their NOTIFYs carry the schema's name, cs_schema_name()
-- (current_schema() would be pg_catalog here).
-- EXECUTE is revoked from PUBLIC at the end (_end.sql): `claimsched roles` grants it.
--
-- One file per function (the helper and trigger functions the migrations first created
-- too: the current definition is here, the migration stays as history), applied in the order of the \ir lines below (a function is created
-- after those it calls). No file names claimsched's schema: it comes from the search_path of the
-- session that runs them, `<schema>, pg_catalog, pg_temp` (migrate sets it; by hand, in psql:
-- SET search_path = claimsched, pg_catalog, pg_temp; then \i index.sql), so that CREATE puts
-- each function in claimsched's schema; each function keeps that path (SET search_path FROM
-- CURRENT), and _paths.sql then puts pg_catalog first in it. The column lists of cs_upsert_schedule are
-- JobSpec's (claimsched.specs.SPEC_COLUMNS; tests/unit/test_sql_files.py holds them equal).
-- Parameters are p_<name> (plpgsql would confuse them with columns); `#variable_conflict
-- use_column` lets the result columns share the names of the table columns they return.
-- plpgsql with RETURN QUERY: the plan of each statement is cached per session, as a prepared
-- statement's would be. So the functions agents call for every run or every period (claim,
-- reclaim, release, effect, housekeeping) read by index whatever the statistics said when the
-- session planned them (SET enable_seqscan = off), and name their rows by key (`r.id = ANY
-- (p_ids)`, a probe per row in a sublink) rather than leave a join to the planner: planned
-- while the tables were small (a new database), a statement scanned every run or schedule
-- until the next analyze, a cost that grew with every run recorded
-- (tests/integration/test_run_plans.py). Only the partial indexes of live runs (running,
-- claimable) may be read whole. Not heartbeat and complete: with enable_seqscan off, planned on
-- a nearly empty table, they would read the whole (job_name, fire_time) index once per run;
-- their plan is left to the statistics, which autovacuum's first analyze of the partition corrects.
--
-- The functions agents call are an API with versions, since a rolling upgrade runs the agents of
-- two releases against one schema (README, "Upgrading"). API 1 is claimsched 0.1.0's: cs_claim,
-- cs_reclaim, cs_heartbeat, cs_complete, cs_housekeeping, cs_release, cs_agent_stopped,
-- cs_effect, cs_declare_schedule. API N >= 2 is the same functions named cs_<name>_vN; an agent
-- calls the functions of one version only (claimsched.db.migrations.AGENT_API). agent_apis
-- (migration 0017) lists the versions this schema serves, agents.api which one each agent
-- calls. A released version never changes its names, arguments or result columns: a change is
-- the next version, beside it. An older version is a thin wrapper over the newest (the end of
-- this file), so the same statements decide every run whichever release claimed it; it goes
-- with a later release's migration, once no live agent calls it.
--
-- Who owns a run: its fencing token (id, fire_time, attempt), the agent id it was claimed with,
-- and its lease token, a secret that every claim and reclaim draws anew and returns only to the
-- claimer. Agent ids and fencing tokens show in logs and statuses, and an agent id may be set by
-- hand: the lease token is what another agent sharing the role cannot know. Every statement on
-- an owned run (renew, complete, release, receipt) matches all three.

\ir _begin.sql
\ir agent_alive.sql
\ir run_wants_owner.sql
\ir database_identity.sql
\ir forbid_in_progress.sql
\ir notify_schedule_change.sql
\ir schedule_active_since.sql
\ir count_schedule_change.sql
\ir cs_schema_name.sql
\ir cs_agent_scope.sql
\ir cs_in_scope.sql
\ir cs_owns_presence.sql
\ir cs_forbid_locked.sql
\ir cs_claim_v2.sql
\ir cs_reclaim_v2.sql
\ir cs_heartbeat_v2.sql
\ir cs_complete_v2.sql
\ir cs_housekeeping_as.sql
\ir cs_housekeeping_v2.sql
\ir cs_release_v2.sql
\ir cs_poll_v2.sql
\ir cs_agent_stopped_v2.sql
\ir cs_effect_v2.sql
\ir cs_upsert_schedule.sql
\ir cs_declare_schedule_v2.sql
\ir cs_request_runs.sql
\ir cs_trigger_run.sql
\ir cs_claim.sql
\ir cs_reclaim.sql
\ir cs_heartbeat.sql
\ir cs_complete.sql
\ir cs_housekeeping.sql
\ir cs_release.sql
\ir cs_agent_stopped.sql
\ir cs_effect.sql
\ir cs_declare_schedule.sql
\ir cs_api_callers.sql
\ir _paths.sql
\ir _end.sql
