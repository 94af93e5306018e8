-- After the functions are (re)created: the search_path each keeps. A file's
-- `SET search_path FROM CURRENT` keeps the path of the session that ran it, which names
-- claimsched's schema first (CREATE puts an unqualified function in the first schema of the
-- path: pg_catalog first would put it in pg_catalog). Run, each function resolves pg_catalog
-- first, so that no function or operator of another schema (nor of this one) stands in for a
-- built-in one, then claimsched's schema, then pg_temp, last, so that no caller's temporary
-- table or function stands in for claimsched's.
DO $$
DECLARE
    f regprocedure;
    home name;
BEGIN
    SELECT n.nspname INTO home
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = 'job_runs'::regclass;
    FOR f IN SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = home
               AND EXISTS (SELECT FROM unnest(p.proconfig) AS s(setting)
                           WHERE s.setting LIKE 'search\_path=%')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, home);
    END LOOP;
END
$$;
