"""DDL of the tables the process-test app writes to."""

LEDGER = """
CREATE TABLE IF NOT EXISTS public.starts (job text, fire_time timestamptz, agent text,
                                          attempt int, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS public.ledger (job text, fire_time timestamptz, entity text,
                                          agent text, attempt int);
"""
