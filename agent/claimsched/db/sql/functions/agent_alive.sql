-- Whether an agent is alive: not stopped, and seen within its own time-to-live (database
-- clock). The one definition every reader of the agents table shares. Inlined where it is
-- called (LANGUAGE sql, STABLE, no SET); every role may call it (a predicate over the values
-- it is given, it reads nothing).
-- Called by: cs_housekeeping_as, cs_api_callers, the named queries (list_agents, the
-- operator's status, the web view).
CREATE OR REPLACE FUNCTION agent_alive(stopped_at timestamptz, last_seen timestamptz,
                                       ttl_seconds integer)
RETURNS boolean
LANGUAGE sql STABLE AS $$
SELECT stopped_at IS NULL AND last_seen + make_interval(secs => ttl_seconds) > now()
$$;
