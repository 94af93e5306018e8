CREATE OR REPLACE FUNCTION cs_housekeeping(
    p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[],
    p_version text, p_ttl_seconds integer, p_tzdata text)
RETURNS TABLE (present bigint, orphaned bigint, exhausted bigint, overdue bigint,
               claimable boolean, notified boolean, db_now timestamptz, system_identifier text,
               timeline integer, durability text, joined boolean, peers text[])
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT h.present, h.orphaned, h.exhausted, h.overdue, h.claimable, h.notified, h.db_now,
       h.system_identifier, h.timeline, h.durability, h.joined, h.peers
FROM cs_housekeeping_as(1, p_agent_id, p_hostname, p_pod, p_namespace, p_handlers,
                                 p_version, p_ttl_seconds, p_tzdata) AS h
$$;
