-- Nobody but the owner calls these until `claimsched roles` grants them, but for the roles
-- that could call a function before this file ran: a function dropped above, for a new
-- signature, is granted again to the callers of the one it replaces (by name), and each
-- version of an agent function (cs_<name>, cs_<name>_vN) to the callers of any version of it
-- (a function new in a version, to the callers of cs_housekeeping: every agent), so that a
-- migrate leaves the agents of both releases working before `claimsched roles`.
DO $$
DECLARE
    f regprocedure;
    grantee regrole;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    FOR f, grantee IN SELECT DISTINCT c.f, k.grantee
                      FROM pg_temp.cs_functions c
                      JOIN pg_temp.cs_callers k
                        ON k.name = CASE regexp_replace(c.name, '_v[0-9]+$', '')
                                    -- new in API 2: to every agent (all call housekeeping)
                                    WHEN 'cs_poll' THEN 'cs_housekeeping'
                                    ELSE regexp_replace(c.name, '_v[0-9]+$', '') END
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, grantee);
    END LOOP;
END
$$;
DROP VIEW pg_temp.cs_functions;
DROP TABLE pg_temp.cs_callers;
