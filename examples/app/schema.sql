-- The example shop's own tables (not claimsched's). Apply with the database owner, after
-- `claimsched roles`, which creates the role the app runs as (claimsched_agent).
CREATE SCHEMA IF NOT EXISTS shop;

-- Invoices; the reminder job looks for unpaid ones past their due date.
CREATE TABLE IF NOT EXISTS shop.invoices (
    id bigint PRIMARY KEY,
    customer_email text NOT NULL,
    due_date date NOT NULL,
    paid_at timestamptz
);

-- Messages to send. Deliberately without a unique key: a duplicate reminder would show here.
CREATE TABLE IF NOT EXISTS shop.outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL,
    recipient text NOT NULL,
    subject text NOT NULL,
    job_name text NOT NULL,
    fire_time timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Shopping carts; open carts untouched for 30 minutes are expired.
CREATE TABLE IF NOT EXISTS shop.carts (
    id bigint PRIMARY KEY,
    status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'ordered', 'expired')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expired_by text
);

-- The app reads and writes its data with the agent's role; it changes no table definitions.
GRANT USAGE ON SCHEMA shop TO claimsched_agent;
GRANT SELECT ON shop.invoices TO claimsched_agent;
GRANT SELECT, INSERT ON shop.outbox TO claimsched_agent;
GRANT SELECT, UPDATE ON shop.carts TO claimsched_agent;
