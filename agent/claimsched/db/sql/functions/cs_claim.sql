-- API 1: what the agents of claimsched 0.1.0 call, with that release's names, arguments and
-- result columns, each a thin wrapper over its API 2 version (SECURITY DEFINER too, so EXECUTE
-- on these alone suffices, as 0.1.0's `claimsched roles` granted it). Those agents never send
-- cs_complete the status 'fenced_out', and their housekeeping has no `next_expiry`.
-- Called by: agents of claimsched 0.1.0 (`claimsched roles`), until a later release drops
-- API 1 (migration 0017).
CREATE OR REPLACE FUNCTION cs_claim(
    p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamptz[],
    p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamptz[])
RETURNS TABLE (job_name text, fire_time timestamptz, outcome text, id bigint, attempt integer,
               lease_token uuid, lease_until timestamptz, started_at timestamptz,
               lease_seconds integer, heartbeat_seconds integer, max_attempts integer,
               retry_on_failure boolean, notified boolean, db_now timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_claim_v2(p_agent_id, p_capacity, p_jobs, p_fire_times, p_wants,
                                   p_reasons, p_latest, p_since)
$$;
