-- Housekeeping (cs_housekeeping_as) for an agent of API 2.
-- Called by: agents (`claimsched roles`).
CREATE OR REPLACE FUNCTION cs_housekeeping_v2(
    p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[],
    p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[],
               next_expiry timestamptz)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_housekeeping_as(2, p_agent_id, p_hostname, p_pod, p_namespace,
                                          p_handlers, p_version, p_ttl_seconds, p_tzdata)
$$;
