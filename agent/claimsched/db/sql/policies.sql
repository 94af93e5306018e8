-- claimsched: who reads (and writes) which rows. Code, not schema, as sql/functions/: every
-- `claimsched migrate` applies this file again, after the functions.
--
-- A login with a scope (agent_scopes: `claimsched roles --jobs`, `--jobs-like`; its own role's
-- and those of the roles it is a member of) sees and touches only the rows of its jobs, in
-- every table that names a job; an agent's presence row, when the agent handles one of its
-- jobs or is its own. A login without a scope (the schema's owner and its members, the
-- operator's role, an unscoped agent role) sees every row. The SECURITY DEFINER functions run
-- as the schema's owner, whom row-level security leaves out: what they decide (claims,
-- reclaims, presence) is fenced and scoped in their own statements. The scope is read once per
-- statement (an InitPlan), never once per row.
-- cs_agent_scope() answers for the caller's own scope only: every role may call it (a policy
-- calls it with the reader's rights).

GRANT EXECUTE ON FUNCTION cs_agent_scope() TO PUBLIC;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['job_schedule', 'job_runs', 'job_effects', 'job_attempts',
                             'job_triggers']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS cs_scope ON %I', t);
        EXECUTE format($policy$
            CREATE POLICY cs_scope ON %I
            USING ((SELECT cs_agent_scope()) IS NULL
                   OR job_name LIKE ANY ((SELECT cs_agent_scope())::text[]))
            WITH CHECK ((SELECT cs_agent_scope()) IS NULL
                        OR job_name LIKE ANY ((SELECT cs_agent_scope())::text[]))
        $policy$, t);
    END LOOP;
END
$$;

ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS cs_scope ON agents;
CREATE POLICY cs_scope ON agents
USING ((SELECT cs_agent_scope()) IS NULL OR login_role = session_user
       OR EXISTS (SELECT 1 FROM unnest(handlers) AS h
                  WHERE h LIKE ANY ((SELECT cs_agent_scope())::text[])));
