-- The name of claimsched's schema (the one that holds job_runs, found through the search_path
-- of the function that calls this one): the payload of claimsched's NOTIFYs, which tells
-- the listeners of a database with several claimsched schemas which one changed.
-- Called by: cs_claim_v2, cs_complete_v2, cs_housekeeping_as, cs_agent_stopped_v2 (no grant).
CREATE OR REPLACE FUNCTION cs_schema_name()
RETURNS text
LANGUAGE sql STABLE AS $$
SELECT n.nspname::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = 'job_runs'::pg_catalog.regclass
$$;
