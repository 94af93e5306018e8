-- claimsched's schema as a fresh `claimsched migrate` leaves it (monthly job_runs
-- partitions left out). Generated: python -m claimsched.db.snapshot --dsn ...
-- Read it; never apply it: migrate builds the schema.

CREATE SCHEMA claimsched;

CREATE FUNCTION claimsched.agent_alive(stopped_at timestamp with time zone, last_seen timestamp with time zone, ttl_seconds integer) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
SELECT stopped_at IS NULL AND last_seen + make_interval(secs => ttl_seconds) > now()
$$;

CREATE FUNCTION claimsched.count_schedule_change() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
BEGIN
    UPDATE schedule_epoch SET epoch = epoch + 1, moved_by = pg_current_xact_id()
    WHERE moved_by IS DISTINCT FROM pg_current_xact_id();
    RETURN NULL;
END
$$;

CREATE FUNCTION claimsched.cs_agent_scope() RETURNS text[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT CASE WHEN NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
    (SELECT array_agg(s.job_pattern)  -- NULL for no row
     FROM agent_scopes s JOIN pg_roles r ON r.rolname = s.role
     WHERE pg_has_role(session_user, r.oid, 'MEMBER'))
END
$$;

CREATE FUNCTION claimsched.cs_agent_stopped(p_agent_id text) RETURNS TABLE(agent_id text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_agent_stopped_v2(p_agent_id)
$$;

CREATE FUNCTION claimsched.cs_agent_stopped_v2(p_agent_id text) RETURNS TABLE(agent_id text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE agents a SET stopped_at = now(), last_seen = now()
WHERE a.agent_id = p_agent_id AND cs_owns_presence(a.login_role)
RETURNING a.agent_id;
PERFORM pg_notify('claimsched_agents', cs_schema_name());  -- its peers sweep: one fewer
END
$$;

CREATE FUNCTION claimsched.cs_api_callers(p_api integer) RETURNS TABLE(agent_id text, version text)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT a.agent_id, a.version FROM agents a
WHERE a.api = p_api AND agent_alive(a.stopped_at, a.last_seen, a.ttl_seconds)
ORDER BY a.agent_id
$$;

CREATE FUNCTION claimsched.cs_claim(p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamp with time zone[], p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamp with time zone[]) RETURNS TABLE(job_name text, fire_time timestamp with time zone, outcome text, id bigint, attempt integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, lease_seconds integer, heartbeat_seconds integer, max_attempts integer, retry_on_failure boolean, notified boolean, db_now timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_claim_v2(p_agent_id, p_capacity, p_jobs, p_fire_times, p_wants,
                                   p_reasons, p_latest, p_since)
$$;

CREATE FUNCTION claimsched.cs_claim_v2(p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamp with time zone[], p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamp with time zone[]) RETURNS TABLE(job_name text, fire_time timestamp with time zone, outcome text, id bigint, attempt integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, lease_seconds integer, heartbeat_seconds integer, max_attempts integer, retry_on_failure boolean, notified boolean, db_now timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := cs_agent_scope();
    v_locks integer := current_setting('max_locks_per_transaction')::integer / 2;
BEGIN
RETURN QUERY
WITH cand AS (
    SELECT c.ord, c.job_name, c.fire_time, c.want, c.reason, c.latest,
           s.lease_seconds, s.heartbeat_seconds, s.max_attempts, s.retry_on_failure,
           s.concurrency_policy,
           CASE
               WHEN s.job_name IS NULL OR NOT s.enabled
                    OR c.fire_time <= greatest(s.active_since, s.suspend_until)
                   THEN 'inactive'
               WHEN c.since IS DISTINCT FROM s.active_since THEN 'stale'
               WHEN c.fire_time > now() THEN 'not_due'
               WHEN EXISTS (SELECT 1 FROM job_runs r  -- one index probe per candidate
                            WHERE r.job_name = c.job_name AND r.fire_time = c.fire_time
                            OFFSET 0)
                   THEN 'taken'
               ELSE c.want
           END AS first_verdict
    FROM unnest(p_jobs, p_fire_times, p_wants, p_reasons, p_latest, p_since)
         WITH ORDINALITY AS c(job_name, fire_time, want, reason, latest, since, ord)
    LEFT JOIN LATERAL (SELECT * FROM job_schedule s WHERE s.job_name = c.job_name OFFSET 0) s
        ON v_scope IS NULL OR c.job_name LIKE ANY (v_scope)  -- one probe per candidate
),
forbid AS (
    SELECT f.job_name, f.busy
    FROM cs_forbid_locked(ARRAY(SELECT DISTINCT cand.job_name FROM cand
                                WHERE cand.first_verdict = 'running'
                                  AND cand.concurrency_policy = 'Forbid')) AS f
),
decided AS (
    SELECT cand.*,
           CASE WHEN cand.first_verdict <> 'running' OR cand.concurrency_policy <> 'Forbid'
                    THEN cand.first_verdict
                WHEN cand.job_name NOT IN (SELECT forbid.job_name FROM forbid)
                    THEN 'contended'
                WHEN cand.job_name IN (SELECT forbid.job_name FROM forbid WHERE forbid.busy)
                    THEN CASE WHEN cand.latest THEN 'busy' ELSE 'deferred' END
                WHEN row_number() OVER (PARTITION BY cand.job_name, cand.first_verdict
                                        ORDER BY cand.fire_time) > 1
                    THEN 'deferred'
                ELSE cand.first_verdict END AS verdict
    FROM cand
),
ranked AS (
    SELECT decided.*,
           row_number() OVER (PARTITION BY decided.verdict = 'running'
                              ORDER BY decided.ord) AS slot
    FROM decided
),
inserting AS (
    SELECT ranked.*,
           row_number() OVER (ORDER BY ranked.verdict = 'running' DESC, ranked.ord) AS nth
    FROM ranked
    WHERE ranked.verdict IN ('skipped', 'busy')
       OR (ranked.verdict = 'running' AND ranked.slot <= p_capacity)
),
chosen AS MATERIALIZED (
    SELECT * FROM inserting i
    WHERE CASE WHEN i.nth > v_locks THEN true
               ELSE pg_try_advisory_xact_lock(
                        hashtext(i.job_name),
                        hashint8((extract(epoch FROM i.fire_time) * 1000000)::bigint)) END
),
ins AS (
    INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by, lease_until,
                          lease_token, attempt, started_at, finished_at, error)
    SELECT ch.job_name, ch.fire_time, 'scheduled',
           CASE WHEN ch.verdict = 'running' THEN 'running' ELSE 'skipped' END,
           p_agent_id,
           CASE WHEN ch.verdict = 'running'
                THEN now() + make_interval(secs => ch.lease_seconds) END,
           CASE WHEN ch.verdict = 'running' THEN gen_random_uuid() END,
           1, now(),
           CASE WHEN ch.verdict = 'running' THEN NULL ELSE now() END,
           CASE WHEN ch.verdict = 'busy'
                THEN 'skipped: the previous run is still running (concurrencyPolicy Forbid)'
                WHEN ch.verdict = 'skipped' THEN ch.reason END
    FROM chosen ch
    ORDER BY ch.job_name, ch.fire_time
    ON CONFLICT (job_name, fire_time) DO NOTHING
    RETURNING job_runs.id, job_runs.job_name, job_runs.fire_time, job_runs.status,
              job_runs.attempt, job_runs.lease_token, job_runs.lease_until, job_runs.started_at
),
replacing AS MATERIALIZED (
    SELECT ins.job_name, ins.fire_time
    FROM ins JOIN chosen ch ON ch.job_name = ins.job_name AND ch.fire_time = ins.fire_time
    WHERE ch.concurrency_policy = 'Replace' AND ins.status = 'running'
),
replaced AS (
    UPDATE job_runs r
    SET status = 'failed', finished_at = now(), lease_until = now(),
        error = 'replaced by the occurrence at ' || p.fire_time || ' (concurrencyPolicy Replace)'
    FROM replacing p
    WHERE r.job_name = p.job_name AND r.status = 'running' AND r.fire_time < p.fire_time
    RETURNING r.id
)
SELECT c.job_name, c.fire_time,
       CASE WHEN i.id IS NOT NULL THEN
                CASE WHEN i.status = 'running' THEN 'claimed' ELSE 'skipped' END
            WHEN c.verdict = 'running' AND c.slot > p_capacity THEN 'no_capacity'
            WHEN c.verdict IN ('running', 'skipped', 'busy') AND ch.ord IS NULL
                THEN 'contended'
            WHEN c.verdict IN ('running', 'skipped', 'busy') THEN 'taken'
            ELSE c.verdict END,
       i.id, i.attempt, i.lease_token, i.lease_until, i.started_at,
       c.lease_seconds, c.heartbeat_seconds, c.max_attempts, c.retry_on_failure,
       CASE WHEN EXISTS (SELECT 1 FROM replaced)
            THEN pg_notify('claimsched_runs', cs_schema_name())::text = '' END,
       now() + (clock_timestamp() - now()) / 2
FROM (SELECT now()) AS clock
LEFT JOIN ranked c ON true
LEFT JOIN chosen ch ON ch.ord = c.ord
LEFT JOIN ins i ON i.job_name = c.job_name AND i.fire_time = c.fire_time
ORDER BY c.ord;
END
$$;

CREATE FUNCTION claimsched.cs_complete(p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts integer[], p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[], p_max_attempts integer[], p_backoffs double precision[]) RETURNS TABLE(id bigint, retry_at timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_complete_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                      p_lease_tokens, p_statuses, p_errors, p_retries,
                                      p_max_attempts, p_backoffs)
$$;

CREATE FUNCTION claimsched.cs_complete_v2(p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts integer[], p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries boolean[], p_max_attempts integer[], p_backoffs double precision[]) RETURNS TABLE(id bigint, retry_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
                  WHEN r.attempt >= c.max_attempts THEN 'failed' ELSE 'orphaned' END,
    finished_at = CASE WHEN c.status <> 'fenced_out' OR r.attempt >= c.max_attempts
                       THEN now() END,
    error = CASE WHEN c.status <> 'fenced_out' THEN c.error
                 ELSE 'fenced out (claimed by ' || r.claimed_by || ', attempt ' || r.attempt
                      || '): ' || coalesce(c.error, 'the lease was lost')
                      || CASE WHEN r.attempt >= c.max_attempts
                              THEN '; attempts exhausted' ELSE '' END END,
    lease_until = least(r.lease_until, now()),
    orphan_count = r.orphan_count
                   + CASE WHEN c.status = 'fenced_out' AND r.status = 'running' THEN 1 ELSE 0 END,
    retry_at = CASE WHEN c.status = 'failed' AND c.retry AND r.attempt < c.max_attempts
                    THEN now() + make_interval(secs => c.backoff) END
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_statuses, p_errors, p_retries,
            p_max_attempts, p_backoffs)
     AS c(id, fire_time, attempt, lease_token, status, error, retry, max_attempts, backoff)
WHERE r.id = c.id AND r.fire_time = c.fire_time AND r.attempt = c.attempt
  AND r.lease_token = c.lease_token
  AND r.claimed_by = p_agent_id AND r.status IN ('running', 'orphaned')
  AND c.status IN ('done', 'failed', 'fenced_out')
RETURNING r.id, r.retry_at;
IF 'fenced_out' = ANY (p_statuses) THEN  -- runs given back want an owner now
    PERFORM pg_notify('claimsched_runs', cs_schema_name());
END IF;
END
$$;

CREATE FUNCTION claimsched.cs_declare_schedule(p_spec jsonb) RETURNS TABLE(source text, owner text, written boolean, created boolean)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_declare_schedule_v2(p_spec)
$$;

CREATE FUNCTION claimsched.cs_declare_schedule_v2(p_spec jsonb) RETURNS TABLE(source text, owner text, written boolean, created boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
SELECT * FROM cs_upsert_schedule(
    p_spec || jsonb_build_object('source', 'code', 'owner', NULL::text));
END
$$;

CREATE FUNCTION claimsched.cs_effect(p_run_id bigint, p_fire_time timestamp with time zone, p_agent_id text, p_attempt integer, p_lease_token uuid, p_entity text, p_job_name text) RETURNS TABLE(owned boolean, inserted boolean)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_effect_v2(p_run_id, p_fire_time, p_agent_id, p_attempt,
                                    p_lease_token, p_entity, p_job_name)
$$;

CREATE FUNCTION claimsched.cs_effect_v2(p_run_id bigint, p_fire_time timestamp with time zone, p_agent_id text, p_attempt integer, p_lease_token uuid, p_entity text, p_job_name text) RETURNS TABLE(owned boolean, inserted boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH fence AS (
    SELECT r.id, r.attempt FROM job_runs r
    WHERE r.id = p_run_id AND r.fire_time = p_fire_time AND r.claimed_by = p_agent_id
      AND r.attempt = p_attempt AND r.lease_token = p_lease_token AND r.job_name = p_job_name AND r.status = 'running'
      AND r.lease_until > now()
    FOR KEY SHARE
),
ins AS (
    INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt)
    SELECT p_entity, p_job_name, p_fire_time, fence.id, fence.attempt FROM fence
    ON CONFLICT (entity, job_name, fire_time) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM ins);
END
$$;

CREATE FUNCTION claimsched.cs_forbid_locked(p_jobs text[]) RETURNS TABLE(job_name text, busy boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_locked text[] := ARRAY(SELECT s.job_name FROM job_schedule s
                             WHERE s.job_name = ANY (p_jobs)
                             ORDER BY s.job_name FOR NO KEY UPDATE OF s SKIP LOCKED);
BEGIN
RETURN QUERY
SELECT l.name, l.name IN (SELECT b.job_name FROM forbid_in_progress(v_locked) AS b)
FROM unnest(v_locked) AS l(name);
END
$$;

CREATE FUNCTION claimsched.cs_heartbeat(p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts integer[], p_lease_tokens uuid[], p_leases double precision[]) RETURNS TABLE(id bigint)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_heartbeat_v2(p_agent_id, p_ids, p_fire_times, p_attempts,
                                       p_lease_tokens, p_leases)
$$;

CREATE FUNCTION claimsched.cs_heartbeat_v2(p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts integer[], p_lease_tokens uuid[], p_leases double precision[]) RETURNS TABLE(id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r
FROM unnest(p_ids, p_fire_times, p_attempts, p_lease_tokens, p_leases)
     AS h(id, fire_time, attempt, lease_token, lease_seconds)
WHERE r.id = h.id AND r.fire_time = h.fire_time AND r.attempt = h.attempt
  AND r.lease_token = h.lease_token AND r.claimed_by = p_agent_id AND r.status = 'running' AND r.lease_until > now()
RETURNING r.id;
END
$$;

CREATE FUNCTION claimsched.cs_housekeeping(p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[], p_version text, p_ttl_seconds integer, p_tzdata text) RETURNS TABLE(present bigint, orphaned bigint, exhausted bigint, overdue bigint, claimable boolean, notified boolean, db_now timestamp with time zone, system_identifier text, timeline integer, durability text, joined boolean, peers text[])
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT h.present, h.orphaned, h.exhausted, h.overdue, h.claimable, h.notified, h.db_now,
       h.system_identifier, h.timeline, h.durability, h.joined, h.peers
FROM cs_housekeeping_as(1, p_agent_id, p_hostname, p_pod, p_namespace, p_handlers,
                                 p_version, p_ttl_seconds, p_tzdata) AS h
$$;

CREATE FUNCTION claimsched.cs_housekeeping_as(p_api integer, p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[], p_version text, p_ttl_seconds integer, p_tzdata text) RETURNS TABLE(present bigint, orphaned bigint, exhausted bigint, overdue bigint, claimable boolean, notified boolean, db_now timestamp with time zone, system_identifier text, timeline integer, durability text, joined boolean, peers text[], next_expiry timestamp with time zone)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
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

CREATE FUNCTION claimsched.cs_housekeeping_v2(p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[], p_version text, p_ttl_seconds integer, p_tzdata text) RETURNS TABLE(present bigint, orphaned bigint, exhausted bigint, overdue bigint, claimable boolean, notified boolean, db_now timestamp with time zone, system_identifier text, timeline integer, durability text, joined boolean, peers text[], next_expiry timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_housekeeping_as(2, p_agent_id, p_hostname, p_pod, p_namespace,
                                          p_handlers, p_version, p_ttl_seconds, p_tzdata)
$$;

CREATE FUNCTION claimsched.cs_in_scope(p_job_name text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT v.scope IS NULL OR coalesce(p_job_name LIKE ANY (v.scope), false)
FROM (SELECT cs_agent_scope() AS scope) AS v
$$;

CREATE FUNCTION claimsched.cs_owns_presence(p_login_role text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT p_login_role IS NULL OR p_login_role = session_user
       OR pg_has_role(session_user, current_user, 'MEMBER')
$$;

CREATE FUNCTION claimsched.cs_poll_v2(p_agent_id text) RETURNS TABLE(schedules text, claimable boolean)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT (SELECT e.epoch::text FROM schedule_epoch e),
       EXISTS (SELECT 1
               FROM (SELECT DISTINCT r.job_name FROM job_runs r
                     WHERE run_wants_owner(r.status, r.fire_time, r.retry_at)
                     OFFSET 0) w  -- a filter over the few wanted jobs, not 100,000 probes
               WHERE w.job_name = ANY ((SELECT a.handlers FROM agents a
                                        WHERE a.agent_id = p_agent_id
                                          AND cs_owns_presence(a.login_role))::text[]))
$$;

CREATE FUNCTION claimsched.cs_reclaim(p_agent_id text, p_jobs text[], p_capacity integer) RETURNS TABLE(id bigint, job_name text, fire_time timestamp with time zone, kind text, attempt integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, orphan_count integer, lease_seconds integer, heartbeat_seconds integer, max_attempts integer, retry_on_failure boolean, db_now timestamp with time zone)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_reclaim_v2(p_agent_id, p_jobs, p_capacity)
$$;

CREATE FUNCTION claimsched.cs_reclaim_v2(p_agent_id text, p_jobs text[], p_capacity integer) RETURNS TABLE(id bigint, job_name text, fire_time timestamp with time zone, kind text, attempt integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, orphan_count integer, lease_seconds integer, heartbeat_seconds integer, max_attempts integer, retry_on_failure boolean, db_now timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_scope text[] := cs_agent_scope();
BEGIN
IF p_jobs IS NULL THEN  -- the agent's job list as housekeeping keeps it in its agents row
    SELECT a.handlers INTO p_jobs FROM agents a WHERE a.agent_id = p_agent_id;
END IF;
IF v_scope IS NOT NULL THEN
    p_jobs := ARRAY(SELECT j.name FROM unnest(p_jobs) AS j(name) WHERE j.name LIKE ANY (v_scope));
END IF;
RETURN QUERY
WITH picked AS (
    SELECT r.id, r.job_name, r.fire_time, r.status, r.attempt, r.claimed_by, r.started_at,
           r.finished_at, r.lease_until, r.error
    FROM job_runs r
    WHERE r.job_name = ANY(p_jobs)
      AND run_wants_owner(r.status, r.fire_time, r.retry_at)
      -- A Forbid job's run that must wait (another of its runs is in progress or comes first)
      -- takes no place under the LIMIT, or a Forbid backlog would hold back every other job's
      -- waiting runs. In the snapshot only: `forbid` and `busy` below decide, after the lock.
      AND NOT (EXISTS (SELECT 1 FROM job_schedule s
                       WHERE s.job_name = r.job_name AND s.concurrency_policy = 'Forbid'
                       OFFSET 0)
               AND EXISTS (SELECT 1 FROM job_runs o
                           WHERE o.job_name = r.job_name AND o.id <> r.id
                             AND (o.status = 'running'
                                  OR (run_wants_owner(o.status, o.fire_time, o.retry_at)
                                      AND (o.status <> 'orphaned', o.fire_time)
                                          < (r.status <> 'orphaned', r.fire_time)))))
    ORDER BY r.status = 'orphaned' DESC, r.fire_time
    LIMIT p_capacity
    FOR UPDATE OF r SKIP LOCKED
),
forbid AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.job_name
                                   ORDER BY p.status = 'orphaned' DESC, p.fire_time) AS nth
    FROM picked p
    WHERE EXISTS (SELECT 1 FROM job_schedule s
                  WHERE s.job_name = p.job_name AND s.concurrency_policy = 'Forbid' OFFSET 0)
),
busy AS (
    SELECT * FROM forbid_in_progress(ARRAY(SELECT DISTINCT f.job_name FROM forbid f))
),
taken AS (
    SELECT p.id, p.fire_time FROM picked p
    WHERE NOT EXISTS (
        SELECT 1 FROM forbid f
        WHERE f.id = p.id AND f.fire_time = p.fire_time
          AND (f.nth > 1
               OR EXISTS (SELECT 1 FROM busy b
                          WHERE b.job_name = f.job_name AND b.id <> f.id
                            AND (b.status = 'running' OR f.status <> 'orphaned'
                                 OR b.fire_time < f.fire_time))))
),
superseded AS (  -- the attempt each taken run had before: its history
    INSERT INTO job_attempts (job_name, fire_time, attempt, run_id, claimed_by, started_at,
                              ended_at, outcome, error)
    SELECT p.job_name, p.fire_time, p.attempt, p.id, p.claimed_by, p.started_at,
           coalesce(p.finished_at, p.lease_until),
           CASE WHEN p.status = 'failed' THEN 'failed'
                WHEN p.error LIKE 'fenced out %' THEN 'fenced_out' ELSE 'orphaned' END,
           p.error
    FROM picked p JOIN taken t ON t.id = p.id AND t.fire_time = p.fire_time
    WHERE p.status <> 'pending'
    ON CONFLICT (job_name, fire_time, attempt) DO NOTHING
)
UPDATE job_runs r
    lease_token = gen_random_uuid(), lease_until = now() + make_interval(secs => s.lease_seconds), started_at = now(),
    finished_at = NULL, retry_at = NULL
FROM taken, job_schedule s
WHERE r.id = taken.id AND r.fire_time = taken.fire_time AND s.job_name = r.job_name
RETURNING r.id, r.job_name, r.fire_time, r.kind, r.attempt, r.lease_token, r.lease_until,
          r.started_at, r.orphan_count, s.lease_seconds, s.heartbeat_seconds, s.max_attempts,
          s.retry_on_failure, now();
END
$$;

CREATE FUNCTION claimsched.cs_release(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[]) RETURNS TABLE(id bigint)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
SELECT * FROM cs_release_v2(p_agent_id, p_ids, p_lease_tokens)
$$;

CREATE FUNCTION claimsched.cs_release_v2(p_agent_id text, p_ids bigint[], p_lease_tokens uuid[]) RETURNS TABLE(id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
UPDATE job_runs r SET lease_until = now() - interval '1 microsecond'
FROM unnest(p_ids, p_lease_tokens) AS x(id, lease_token)
WHERE r.id = ANY (p_ids) AND r.id = x.id AND r.lease_token = x.lease_token
  AND r.claimed_by = p_agent_id AND r.status = 'running'
RETURNING r.id;
END
$$;

CREATE FUNCTION claimsched.cs_request_runs(p_job_name text, p_fire_times timestamp with time zone[], p_kind text) RETURNS TABLE(id bigint, fire_time timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
IF p_kind = 'backfill' THEN  -- past occurrences: an operator's counts of settled history are void
    UPDATE history_epoch SET epoch = epoch + 1;
END IF;
RETURN QUERY
INSERT INTO job_runs (job_name, fire_time, kind, status, attempt)
SELECT s.job_name, f.fire_time, p_kind, 'pending', 0
FROM job_schedule s, unnest(p_fire_times) AS f(fire_time)
WHERE s.job_name = p_job_name AND p_kind IN ('manual', 'backfill')
  AND cs_in_scope(p_job_name)
ON CONFLICT (job_name, fire_time) DO NOTHING
RETURNING job_runs.id, job_runs.fire_time;
END
$$;

CREATE FUNCTION claimsched.cs_schema_name() RETURNS text
    LANGUAGE sql STABLE
    AS $$
SELECT n.nspname::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = 'job_runs'::pg_catalog.regclass
$$;

CREATE FUNCTION claimsched.cs_trigger_run(p_job_name text, p_trigger_key text) RETURNS TABLE(known boolean, keyed timestamp with time zone, requested timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH job AS (  -- a job outside the caller's scope is as unknown
    SELECT s.job_name FROM job_schedule s
    WHERE s.job_name = p_job_name AND cs_in_scope(p_job_name)
), keyed AS (
    INSERT INTO job_triggers (trigger_key, job_name, fire_time)
    SELECT p_trigger_key, job.job_name,
           now() + CASE WHEN date_trunc('second', now()) = now()
                        THEN interval '1 microsecond' ELSE interval '0' END
    FROM job
    ON CONFLICT (trigger_key) DO NOTHING
    RETURNING job_triggers.job_name, job_triggers.fire_time
), requested AS (
    INSERT INTO job_runs (job_name, fire_time, kind, status, attempt)
    SELECT k.job_name, k.fire_time, 'manual', 'pending', 0 FROM keyed k
    ON CONFLICT (job_name, fire_time) DO NOTHING
    RETURNING job_runs.fire_time
)
SELECT EXISTS (SELECT 1 FROM job),
       (SELECT k.fire_time FROM keyed k),
       (SELECT r.fire_time FROM requested r);
END
$$;

CREATE FUNCTION claimsched.cs_upsert_schedule(p_spec jsonb) RETURNS TABLE(source text, owner text, written boolean, created boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'claimsched', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
IF NOT cs_in_scope(p_spec ->> 'job_name') THEN  -- the row's owner, if any; no write
    RETURN QUERY
    SELECT s.source, s.owner, false, false
    FROM (SELECT) AS one LEFT JOIN job_schedule s ON s.job_name = p_spec ->> 'job_name';
    RETURN;
END IF;
RETURN QUERY
WITH spec AS (
    SELECT * FROM jsonb_populate_record(NULL::job_schedule, p_spec)
), before AS (
    SELECT s.source, s.owner FROM job_schedule s, spec WHERE s.job_name = spec.job_name
), written AS (
    INSERT INTO job_schedule AS s (job_name, "schedule", "time_zone", "enabled", "lease_seconds", "heartbeat_seconds", "max_attempts", "retry_on_failure", "concurrency_policy", "catch_up_window_seconds", "catch_up_policy", "max_runtime_seconds", "source", "owner", "suspend_reason", "suspend_until")
    SELECT spec.job_name, "spec"."schedule", "spec"."time_zone", "spec"."enabled", "spec"."lease_seconds", "spec"."heartbeat_seconds", "spec"."max_attempts", "spec"."retry_on_failure", "spec"."concurrency_policy", "spec"."catch_up_window_seconds", "spec"."catch_up_policy", "spec"."max_runtime_seconds", "spec"."source", "spec"."owner", "spec"."suspend_reason", "spec"."suspend_until" FROM spec
    ON CONFLICT (job_name) DO UPDATE SET ("schedule", "time_zone", "enabled", "lease_seconds", "heartbeat_seconds", "max_attempts", "retry_on_failure", "concurrency_policy", "catch_up_window_seconds", "catch_up_policy", "max_runtime_seconds", "source", "owner", "suspend_reason", "suspend_until") = ROW("excluded"."schedule", "excluded"."time_zone", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."enabled" ELSE "excluded"."enabled" END, "excluded"."lease_seconds", "excluded"."heartbeat_seconds", "excluded"."max_attempts", "excluded"."retry_on_failure", "excluded"."concurrency_policy", "excluded"."catch_up_window_seconds", "excluded"."catch_up_policy", "excluded"."max_runtime_seconds", "excluded"."source", "excluded"."owner", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_reason" ELSE "excluded"."suspend_reason" END, CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_until" ELSE "excluded"."suspend_until" END)
    WHERE (s.source = EXCLUDED.source AND s.owner IS NOT DISTINCT FROM EXCLUDED.owner
           OR s.source = 'operator' AND s.owner IS NULL
           OR s.source = 'code' AND EXCLUDED.source = 'cli')
      AND ROW("s"."schedule", "s"."time_zone", "s"."enabled", "s"."lease_seconds", "s"."heartbeat_seconds", "s"."max_attempts", "s"."retry_on_failure", "s"."concurrency_policy", "s"."catch_up_window_seconds", "s"."catch_up_policy", "s"."max_runtime_seconds", "s"."source", "s"."owner", "s"."suspend_reason", "s"."suspend_until") IS DISTINCT FROM ROW("excluded"."schedule", "excluded"."time_zone", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."enabled" ELSE "excluded"."enabled" END, "excluded"."lease_seconds", "excluded"."heartbeat_seconds", "excluded"."max_attempts", "excluded"."retry_on_failure", "excluded"."concurrency_policy", "excluded"."catch_up_window_seconds", "excluded"."catch_up_policy", "excluded"."max_runtime_seconds", "excluded"."source", "excluded"."owner", CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_reason" ELSE "excluded"."suspend_reason" END, CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN "s"."suspend_until" ELSE "excluded"."suspend_until" END)
    RETURNING (xmax = 0) AS created
)
SELECT (SELECT b.source FROM before b),
       (SELECT b.owner FROM before b),
       EXISTS (SELECT 1 FROM written),
       coalesce((SELECT w.created FROM written w), false);
END
$$;

CREATE FUNCTION claimsched.database_identity(OUT system_identifier text, OUT timeline integer, OUT durability text) RETURNS record
    LANGUAGE sql STABLE
    AS $$
    SELECT (SELECT c.system_identifier FROM pg_control_system() c)::text,
           CASE WHEN pg_is_in_recovery() THEN (SELECT c.timeline_id FROM pg_control_checkpoint() c)
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
           END,
           CASE WHEN current_setting('synchronous_standby_names') <> '' THEN 'synchronous'
                WHEN EXISTS (SELECT 1 FROM pg_stat_replication) THEN 'asynchronous'
                ELSE 'standalone'
           END
$$;

CREATE FUNCTION claimsched.forbid_in_progress(jobs text[]) RETURNS TABLE(job_name text, id bigint, fire_time timestamp with time zone, status text)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM FROM job_schedule s WHERE s.job_name = ANY (jobs)
        ORDER BY s.job_name FOR NO KEY UPDATE OF s;
    RETURN QUERY
        SELECT r.job_name, r.id, r.fire_time, r.status FROM job_runs r
        WHERE r.job_name = ANY (jobs) AND r.status = 'running'
        UNION ALL
        SELECT r.job_name, r.id, r.fire_time, r.status FROM job_runs r
        WHERE r.job_name = ANY (jobs) AND r.status = 'orphaned';
END
$$;

CREATE FUNCTION claimsched.notify_schedule_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION claimsched.run_wants_owner(status text, fire_time timestamp with time zone, retry_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
SELECT (status = 'pending' AND fire_time <= now()) OR status = 'orphaned'
       OR (status = 'failed' AND retry_at <= now())
$$;

CREATE FUNCTION claimsched.schedule_active_since() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE claimsched.agent_apis (
    api integer NOT NULL,
    release text NOT NULL
);

CREATE TABLE claimsched.agent_scopes (
    role text NOT NULL,
    job_pattern text NOT NULL
);

CREATE TABLE claimsched.agents (
    agent_id text NOT NULL,
    hostname text NOT NULL,
    pod text,
    namespace text,
    handlers text[] DEFAULT '{}'::text[] NOT NULL,
    version text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL,
    ttl_seconds integer DEFAULT 90 NOT NULL,
    stopped_at timestamp with time zone,
    tzdata text,
    durability text,
    handlers_digest text,
    login_role text,
    api integer DEFAULT 1 NOT NULL
);

CREATE TABLE claimsched.history_epoch (
    single boolean DEFAULT true NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    CONSTRAINT history_epoch_single_check CHECK (single)
);

CREATE TABLE claimsched.job_attempts (
    job_name text NOT NULL,
    fire_time timestamp with time zone NOT NULL,
    attempt integer NOT NULL,
    run_id bigint NOT NULL,
    claimed_by text,
    started_at timestamp with time zone,
    ended_at timestamp with time zone,
    outcome text NOT NULL,
    error text,
    CONSTRAINT job_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['orphaned'::text, 'fenced_out'::text, 'failed'::text])))
);

CREATE TABLE claimsched.job_effects (
    entity text NOT NULL,
    job_name text NOT NULL,
    fire_time timestamp with time zone NOT NULL,
    run_id bigint NOT NULL,
    attempt integer NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE claimsched.job_runs (
    id bigint NOT NULL,
    job_name text NOT NULL,
    fire_time timestamp with time zone NOT NULL,
    kind text DEFAULT 'scheduled'::text NOT NULL,
    status text NOT NULL,
    claimed_by text,
    lease_until timestamp with time zone,
    attempt integer DEFAULT 1 NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    error text,
    orphan_count integer DEFAULT 0 NOT NULL,
    retry_at timestamp with time zone,
    lease_token uuid,
    CONSTRAINT job_runs_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT job_runs_kind_check CHECK ((kind = ANY (ARRAY['scheduled'::text, 'manual'::text, 'backfill'::text]))),
    CONSTRAINT job_runs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'done'::text, 'failed'::text, 'orphaned'::text, 'skipped'::text])))
)
PARTITION BY RANGE (fire_time);

CREATE TABLE claimsched.job_runs_default (
    id bigint NOT NULL,
    job_name text NOT NULL,
    fire_time timestamp with time zone NOT NULL,
    kind text DEFAULT 'scheduled'::text NOT NULL,
    status text NOT NULL,
    claimed_by text,
    lease_until timestamp with time zone,
    attempt integer DEFAULT 1 NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    error text,
    orphan_count integer DEFAULT 0 NOT NULL,
    retry_at timestamp with time zone,
    lease_token uuid,
    CONSTRAINT job_runs_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT job_runs_kind_check CHECK ((kind = ANY (ARRAY['scheduled'::text, 'manual'::text, 'backfill'::text]))),
    CONSTRAINT job_runs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'done'::text, 'failed'::text, 'orphaned'::text, 'skipped'::text])))
);

ALTER TABLE claimsched.job_runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME claimsched.job_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE claimsched.job_schedule (
    job_name text NOT NULL,
    schedule text NOT NULL,
    time_zone text DEFAULT 'UTC'::text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    lease_seconds integer DEFAULT 120 NOT NULL,
    heartbeat_seconds integer DEFAULT 30 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    retry_on_failure boolean DEFAULT false NOT NULL,
    concurrency_policy text DEFAULT 'Forbid'::text NOT NULL,
    catch_up_window_seconds integer DEFAULT 3600 NOT NULL,
    catch_up_policy text DEFAULT 'Latest'::text NOT NULL,
    max_runtime_seconds integer,
    source text DEFAULT 'code'::text NOT NULL,
    owner text,
    active_since timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    suspend_reason text,
    suspend_until timestamp with time zone,
    CONSTRAINT job_schedule_catch_up_policy_check CHECK ((catch_up_policy = ANY (ARRAY['All'::text, 'Latest'::text, 'None'::text]))),
    CONSTRAINT job_schedule_catch_up_window_seconds_check CHECK (((catch_up_window_seconds >= 0) AND (catch_up_window_seconds <= 2678400))),
    CONSTRAINT job_schedule_check CHECK (((heartbeat_seconds >= 1) AND ((heartbeat_seconds * 3) <= GREATEST(lease_seconds, 3)))),
    CONSTRAINT job_schedule_concurrency_policy_check CHECK ((concurrency_policy = ANY (ARRAY['Forbid'::text, 'Allow'::text, 'Replace'::text]))),
    CONSTRAINT job_schedule_job_name_check CHECK ((job_name ~ '^[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?$'::text)),
    CONSTRAINT job_schedule_lease_seconds_check CHECK (((lease_seconds >= 1) AND (lease_seconds <= 86400))),
    CONSTRAINT job_schedule_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT job_schedule_max_runtime_seconds_check CHECK (((max_runtime_seconds IS NULL) OR (max_runtime_seconds >= 1))),
    CONSTRAINT job_schedule_source_check CHECK ((source = ANY (ARRAY['operator'::text, 'code'::text, 'cli'::text]))),
    CONSTRAINT job_schedule_suspend_reason_check CHECK ((length(suspend_reason) <= 1024))
);

CREATE TABLE claimsched.job_triggers (
    trigger_key text NOT NULL,
    job_name text NOT NULL,
    fire_time timestamp with time zone NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE claimsched.schedule_epoch (
    single boolean DEFAULT true NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    moved_by xid8,
    CONSTRAINT schedule_epoch_single_check CHECK (single)
);

CREATE TABLE claimsched.schema_version (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY claimsched.job_runs ATTACH PARTITION claimsched.job_runs_default DEFAULT;

ALTER TABLE ONLY claimsched.agent_apis
    ADD CONSTRAINT agent_apis_pkey PRIMARY KEY (api);

ALTER TABLE ONLY claimsched.agent_scopes
    ADD CONSTRAINT agent_scopes_pkey PRIMARY KEY (role, job_pattern);

ALTER TABLE ONLY claimsched.agents
    ADD CONSTRAINT agents_pkey PRIMARY KEY (agent_id);

ALTER TABLE ONLY claimsched.history_epoch
    ADD CONSTRAINT history_epoch_pkey PRIMARY KEY (single);

ALTER TABLE ONLY claimsched.job_attempts
    ADD CONSTRAINT job_attempts_pkey PRIMARY KEY (job_name, fire_time, attempt);

ALTER TABLE ONLY claimsched.job_effects
    ADD CONSTRAINT job_effects_pkey PRIMARY KEY (entity, job_name, fire_time);

ALTER TABLE ONLY claimsched.job_runs
    ADD CONSTRAINT job_runs_id_fire_time_attempt_key UNIQUE (id, fire_time, attempt);

ALTER TABLE ONLY claimsched.job_runs_default
    ADD CONSTRAINT job_runs_default_id_fire_time_attempt_key UNIQUE (id, fire_time, attempt);

ALTER TABLE ONLY claimsched.job_runs
    ADD CONSTRAINT job_runs_job_name_fire_time_key UNIQUE (job_name, fire_time);

ALTER TABLE ONLY claimsched.job_runs_default
    ADD CONSTRAINT job_runs_default_job_name_fire_time_key UNIQUE (job_name, fire_time);

ALTER TABLE ONLY claimsched.job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id, fire_time);

ALTER TABLE ONLY claimsched.job_runs_default
    ADD CONSTRAINT job_runs_default_pkey PRIMARY KEY (id, fire_time);

ALTER TABLE ONLY claimsched.job_schedule
    ADD CONSTRAINT job_schedule_pkey PRIMARY KEY (job_name);

ALTER TABLE ONLY claimsched.job_triggers
    ADD CONSTRAINT job_triggers_pkey PRIMARY KEY (trigger_key);

ALTER TABLE ONLY claimsched.schedule_epoch
    ADD CONSTRAINT schedule_epoch_pkey PRIMARY KEY (single);

ALTER TABLE ONLY claimsched.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);

CREATE INDEX job_effects_occurrence ON claimsched.job_effects USING btree (job_name, fire_time);

CREATE INDEX job_runs_claimable ON ONLY claimsched.job_runs USING btree (job_name, fire_time) WHERE ((status = ANY (ARRAY['pending'::text, 'orphaned'::text])) OR (retry_at IS NOT NULL));

CREATE INDEX job_runs_default_job_name_fire_time_idx ON claimsched.job_runs_default USING btree (job_name, fire_time) WHERE ((status = ANY (ARRAY['pending'::text, 'orphaned'::text])) OR (retry_at IS NOT NULL));

CREATE INDEX job_runs_failed ON ONLY claimsched.job_runs USING btree (job_name, fire_time) WHERE (status = 'failed'::text);

CREATE INDEX job_runs_default_job_name_fire_time_idx1 ON claimsched.job_runs_default USING btree (job_name, fire_time) WHERE (status = 'failed'::text);

CREATE INDEX job_runs_running ON ONLY claimsched.job_runs USING btree (job_name, lease_until) WHERE (status = 'running'::text);

CREATE INDEX job_runs_default_job_name_lease_until_idx ON claimsched.job_runs_default USING btree (job_name, lease_until) WHERE (status = 'running'::text);

ALTER INDEX claimsched.job_runs_id_fire_time_attempt_key ATTACH PARTITION claimsched.job_runs_default_id_fire_time_attempt_key;

ALTER INDEX claimsched.job_runs_claimable ATTACH PARTITION claimsched.job_runs_default_job_name_fire_time_idx;

ALTER INDEX claimsched.job_runs_failed ATTACH PARTITION claimsched.job_runs_default_job_name_fire_time_idx1;

ALTER INDEX claimsched.job_runs_job_name_fire_time_key ATTACH PARTITION claimsched.job_runs_default_job_name_fire_time_key;

ALTER INDEX claimsched.job_runs_running ATTACH PARTITION claimsched.job_runs_default_job_name_lease_until_idx;

ALTER INDEX claimsched.job_runs_pkey ATTACH PARTITION claimsched.job_runs_default_pkey;

CREATE TRIGGER job_schedule_active_since BEFORE UPDATE ON claimsched.job_schedule FOR EACH ROW EXECUTE FUNCTION claimsched.schedule_active_since();

CREATE CONSTRAINT TRIGGER job_schedule_epoch AFTER INSERT OR DELETE OR UPDATE ON claimsched.job_schedule DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION claimsched.count_schedule_change();

CREATE TRIGGER job_schedule_notify_delete AFTER DELETE ON claimsched.job_schedule REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION claimsched.notify_schedule_change();

CREATE TRIGGER job_schedule_notify_insert AFTER INSERT ON claimsched.job_schedule REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION claimsched.notify_schedule_change();

CREATE TRIGGER job_schedule_notify_update AFTER UPDATE ON claimsched.job_schedule REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION claimsched.notify_schedule_change();

ALTER TABLE claimsched.agents ENABLE ROW LEVEL SECURITY;

CREATE POLICY cs_scope ON claimsched.agents USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (login_role = SESSION_USER) OR (EXISTS ( SELECT 1
   FROM unnest(agents.handlers) h(h)
  WHERE (h.h ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))))));

CREATE POLICY cs_scope ON claimsched.job_attempts USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[])))) WITH CHECK (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))));

CREATE POLICY cs_scope ON claimsched.job_effects USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[])))) WITH CHECK (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))));

CREATE POLICY cs_scope ON claimsched.job_runs USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[])))) WITH CHECK (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))));

CREATE POLICY cs_scope ON claimsched.job_schedule USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[])))) WITH CHECK (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))));

CREATE POLICY cs_scope ON claimsched.job_triggers USING (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[])))) WITH CHECK (((( SELECT claimsched.cs_agent_scope() AS cs_agent_scope) IS NULL) OR (job_name ~~ ANY (( SELECT claimsched.cs_agent_scope() AS cs_agent_scope)::text[]))));

ALTER TABLE claimsched.job_attempts ENABLE ROW LEVEL SECURITY;

ALTER TABLE claimsched.job_effects ENABLE ROW LEVEL SECURITY;

ALTER TABLE claimsched.job_runs ENABLE ROW LEVEL SECURITY;

ALTER TABLE claimsched.job_schedule ENABLE ROW LEVEL SECURITY;

ALTER TABLE claimsched.job_triggers ENABLE ROW LEVEL SECURITY;
