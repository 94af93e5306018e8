-- Before the functions are (re)created: what they are now, who may call them, and the
-- versions whose arguments or result columns changed dropped (index.sql).

-- claimsched's functions in this schema, as they are at each moment of this file.
CREATE TEMP VIEW cs_functions AS
SELECT p.oid::regprocedure AS f, p.proname AS name, p.proargnames AS argnames, p.proacl AS acl,
       p.proowner AS owner
FROM pg_proc p
WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c WHERE c.oid = 'job_runs'::regclass)
  AND p.proname LIKE 'cs\_%';

-- Who may call which function now, by name (any version's: cs_<name>_vN counts as cs_<name>):
-- granted again at the end of this file.
CREATE TEMP TABLE cs_callers AS
SELECT regexp_replace(c.name, '_v[0-9]+$', '') AS name, a.grantee::regrole AS grantee
FROM pg_temp.cs_functions c, aclexplode(c.acl) a
WHERE a.privilege_type = 'EXECUTE' AND a.grantee NOT IN (0, c.owner);

-- The versions whose arguments or result columns changed: those from before lease tokens
-- (migration 0009: none of their arguments or result columns is one), cs_housekeeping from
-- before peers (migration 0012: no `joined` result column), and API 1's cs_housekeeping of a
-- schema migrated between 0.1.0 and 0.2.0 (with `next_expiry`, now API 2's; API 1 has
-- claimsched 0.1.0's result columns).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT c.f FROM pg_temp.cs_functions c
             WHERE (c.name IN ('cs_claim', 'cs_reclaim', 'cs_heartbeat', 'cs_complete',
                               'cs_release', 'cs_effect')
                    AND NOT EXISTS (SELECT FROM unnest(c.argnames) AS a(name)
                                    WHERE a.name LIKE '%lease\_token%'))
                OR (c.name = 'cs_housekeeping'
                    AND (NOT 'joined' = ANY (c.argnames) OR 'next_expiry' = ANY (c.argnames)))
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
