-- One cheap statement every few seconds from every agent: refresh presence, turn expired
-- leases into orphans (or failures once attempts are exhausted), fail runs past max_runtime,
-- and say whether any run this agent could take wants an owner. Wakes the others if needed.
-- Also how durable commits are now, for the agent's metric and `agents`.
-- p_handlers is the agent's job list, sent when it starts and whenever `present` said its row
-- lacked one; NULL keeps the row's (an agent may have 100,000 jobs: the list is written once,
-- not every period). `present` is 1 when this agent's row holds its list after the call, 0 when
-- it had none (the row was gone and is back without one): the agent sends the list again.
-- Which runs are this agent's to take is read from its row, as a filter over the few jobs
-- that have such runs (OFFSET 0: the list must not become 100,000 index probes).
-- The row is written only by the login that created it (cs_owns_presence): another's agent id
-- gets `present` 0 and changes nothing. A scoped role's list keeps the jobs of its scope only.
-- `peers`: the live agents with the same job list (its digest, written with the list), the
-- caller among them, sorted; each occurrence's first claimer is one of them (turns.py). An
-- agent that was not a live peer before this call (new, back, or with another list) NOTIFYs
-- claimsched_agents: the others sweep at once, to learn of it (`joined`).
-- `next_expiry`: the earliest end of a lease still running on a run of this agent's jobs that
-- another agent holds (NULL: none), for the agent to sweep again right after it (housekeeping.py):
-- an owner that is gone renews nothing, and its run is reaped one lease after its last renewal,
-- not at the next period. The agent's own leases are left out: it renews them itself. The
-- partial index of running runs is read whole, as the reaper reads it; a run is of this agent's
-- jobs when an agent with the same job list (its digest) holds it, or else by its name.
-- `p_api`: the version of the API the agent calls (agents.api), which the caller's version
-- fixes: cs_housekeeping_v2 says 2, API 1's cs_housekeeping 1.
-- Called by: cs_housekeeping_v2, cs_housekeeping (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_housekeeping_as(
    p_api integer, p_agent_id text, p_hostname text, p_pod text, p_namespace text,
    p_handlers text[], p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[],
               next_expiry timestamptz)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT
    SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := cs_agent_scope();
BEGIN
IF v_scope IS NOT NULL AND p_handlers IS NOT NULL THEN  -- a scoped role lists its jobs only
    p_handlers := ARRAY(SELECT h FROM unnest(p_handlers) AS h WHERE h LIKE ANY (v_scope));
END IF;
RETURN QUERY
WITH presence AS (
    INSERT INTO agents (agent_id, hostname, pod, namespace, handlers, handlers_digest, version,
                        ttl_seconds, tzdata, durability, login_role, api)
    VALUES (p_agent_id, p_hostname, p_pod, p_namespace, coalesce(p_handlers, ARRAY[]::text[]),
            md5(array_to_string(p_handlers, E'\n')), p_version, p_ttl_seconds, p_tzdata,
            (SELECT d.durability FROM database_identity() d), session_user, p_api)
    ON CONFLICT (agent_id) DO UPDATE
    SET last_seen = now(), handlers = coalesce(p_handlers, agents.handlers),
        handlers_digest = coalesce(EXCLUDED.handlers_digest, agents.handlers_digest),
        ttl_seconds = EXCLUDED.ttl_seconds, stopped_at = NULL, durability = EXCLUDED.durability,
        login_role = coalesce(agents.login_role, EXCLUDED.login_role), version = EXCLUDED.version,
        api = EXCLUDED.api
    WHERE cs_owns_presence(agents.login_role)
    RETURNING agents.handlers, agents.handlers_digest
),
expired AS (
    UPDATE job_runs r
    SET status = CASE WHEN r.attempt >= s.max_attempts THEN 'failed' ELSE 'orphaned' END,
        orphan_count = r.orphan_count + 1,
        finished_at = CASE WHEN r.attempt >= s.max_attempts THEN now() END,
        error = 'lease expired (claimed by ' || r.claimed_by || ', attempt ' || r.attempt || ')'
                || CASE WHEN r.attempt >= s.max_attempts
                        THEN '; attempts exhausted' ELSE '' END
    FROM job_schedule s
    WHERE s.job_name = r.job_name AND r.status = 'running' AND r.lease_until < now()
    RETURNING r.id, r.job_name, r.status
),
overdue AS (  -- a probe of its job per running run, never a scan of the schedules
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'max_runtime of ' || (SELECT s.max_runtime_seconds FROM job_schedule s
                                      WHERE s.job_name = r.job_name) || ' s exceeded'
    WHERE r.status = 'running' AND r.lease_until >= now()
      AND r.started_at + make_interval(secs => (SELECT s.max_runtime_seconds FROM job_schedule s
                                                WHERE s.job_name = r.job_name)) < now()
    RETURNING r.id
)
SELECT (SELECT count(*) FROM presence p WHERE cardinality(p.handlers) > 0),
       (SELECT count(*) FROM expired e WHERE e.status = 'orphaned'),
       (SELECT count(*) FROM expired e WHERE e.status = 'failed'),
       (SELECT count(*) FROM overdue),
       EXISTS (SELECT 1
               FROM (SELECT DISTINCT r.job_name FROM job_runs r
                     WHERE run_wants_owner(r.status, r.fire_time, r.retry_at)
                     OFFSET 0) w
               WHERE w.job_name = ANY((SELECT p.handlers FROM presence p)::text[]))
       OR EXISTS (SELECT 1 FROM expired e
                  WHERE e.status = 'orphaned'
                    AND e.job_name = ANY((SELECT p.handlers FROM presence p)::text[])),
       CASE WHEN EXISTS (SELECT 1 FROM expired e WHERE e.status = 'orphaned')
            THEN pg_notify('claimsched_runs', cs_schema_name())::text = '' END,
       now(),
       i.system_identifier, i.timeline, i.durability,
       -- A peer is new (or back): wake the other agents, whose peers changed.
       CASE WHEN NOT EXISTS (
                SELECT 1 FROM agents a
                WHERE a.agent_id = p_agent_id
                  AND agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
                  AND a.handlers_digest = (SELECT p.handlers_digest FROM presence p))
            THEN pg_notify('claimsched_agents', cs_schema_name())::text = '' END,
       ARRAY(SELECT p_agent_id
             UNION
             SELECT a.agent_id FROM agents a
             WHERE a.handlers_digest = (SELECT p.handlers_digest FROM presence p)
               AND agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
             ORDER BY 1),
       (SELECT min(r.lease_until) FROM job_runs r
        WHERE r.status = 'running' AND r.lease_until >= now() AND r.claimed_by <> p_agent_id
          AND (r.claimed_by = ANY (ARRAY(
                   SELECT a.agent_id FROM agents a
                   WHERE a.handlers_digest = (SELECT p.handlers_digest FROM presence p)))
               OR r.job_name = ANY ((SELECT p.handlers FROM presence p)::text[])))
FROM database_identity() i;
END
$$;
