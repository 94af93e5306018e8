-- An agent declares the schedules of its code: always as a code declaration (source 'code',
-- no owner), so it never takes over a row the operator or the CLI owns; nor a job outside its
-- scope (cs_upsert_schedule).
CREATE OR REPLACE FUNCTION cs_declare_schedule_v2(p_spec jsonb)
RETURNS TABLE (source text, owner text, written boolean, created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
SELECT * FROM cs_upsert_schedule(
    p_spec || jsonb_build_object('source', 'code', 'owner', NULL::text));
END
$$;
