-- Whether the caller may write the presence row of an agent created by `p_login_role`
-- (migration 0016): its own login (session_user: inside the functions current_user is their
-- owner), the schema's owner and its members, or anyone for a row from before the column.
-- Called by: cs_housekeeping_as, cs_agent_stopped_v2 (no grant: nobody else).
CREATE OR REPLACE FUNCTION cs_owns_presence(p_login_role text)
RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
SELECT p_login_role IS NULL OR p_login_role = session_user
       OR pg_has_role(session_user, current_user, 'MEMBER')
$$;
