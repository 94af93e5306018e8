-- The jobs the caller may act for (agent_scopes, migration 0011): NULL for every job, else the
-- LIKE patterns of its login role (session_user: inside these functions current_user is their
-- owner) and of the roles it is a member of. The owner and its members (a superuser too) are
-- never scoped. Read once per call, so an unscoped claim pays one look-up, never one per job.
-- SECURITY DEFINER: the row-level security of sql/policies.sql calls it with a reader's rights,
-- and it answers for the caller's own scope only (every role may call it: policies.sql).
-- Called by: cs_claim_v2, cs_reclaim_v2, cs_housekeeping_as, cs_in_scope, the policies.
CREATE OR REPLACE FUNCTION cs_agent_scope()
RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT CASE WHEN NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
    (SELECT array_agg(s.job_pattern)  -- NULL for no row
     FROM agent_scopes s JOIN pg_roles r ON r.rolname = s.role
     WHERE pg_has_role(session_user, r.oid, 'MEMBER'))
END
$$;
