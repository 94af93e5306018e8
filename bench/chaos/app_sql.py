"""DDL of the tables the process-test app writes to, and the chaos harness's audit trail."""

LEDGER = """
CREATE TABLE IF NOT EXISTS public.starts (job text, fire_time timestamptz, agent text,
                                          attempt int, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS public.ledger (job text, fire_time timestamptz, entity text,
                                          agent text, attempt int);
CREATE TABLE IF NOT EXISTS public.external_calls (job text, fire_time timestamptz, entity text,
                                                  idempotency_key text, agent text, attempt int,
                                                  at timestamptz DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS public.wide_ledger (job text, fire_time timestamptz, agent text,
                                               attempt int,
                                               at timestamptz DEFAULT clock_timestamp());
"""

# Every change to a job_runs row, as the database saw it: the chaos checks replay it to prove
# that no occurrence was claimed twice, no finished run changed afterwards, and maintenance
# moved rows without altering them. `actor` is the session's claimsched_test.actor setting.
AUDIT = """
CREATE TABLE IF NOT EXISTS public.run_audit (
    seq bigserial PRIMARY KEY,
    op text NOT NULL,
    tx bigint NOT NULL DEFAULT txid_current(),
    actor text,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    old jsonb,
    new jsonb
);
CREATE OR REPLACE FUNCTION public.audit_job_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the wide soak's light jobs (w....) are checked in SQL (bench/chaos/wide.py): a million
    -- of their runs would bury the trail
    IF coalesce(NEW.job_name, OLD.job_name) >= 'w' THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.run_audit (op, actor, old, new)
    VALUES (TG_OP, current_setting('claimsched_test.actor', true),
            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
            CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS chaos_audit ON claimsched.job_runs;
CREATE TRIGGER chaos_audit AFTER INSERT OR UPDATE OR DELETE ON claimsched.job_runs
    FOR EACH ROW EXECUTE FUNCTION public.audit_job_runs();
"""
