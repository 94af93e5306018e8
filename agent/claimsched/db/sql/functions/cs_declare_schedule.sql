CREATE OR REPLACE FUNCTION cs_declare_schedule(p_spec jsonb)
RETURNS TABLE (source text, owner text, written boolean, created boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
SELECT * FROM cs_declare_schedule_v2(p_spec)
$$;
