"""A shop's background worker: two scheduled jobs that run exactly once across all replicas.

Run it in every replica (three in examples/k8s/deployment.yaml):

    CLAIMSCHED_DSN=postgresql://claimsched_agent@db/shop CLAIMSCHED_MIGRATE=false \
        claimsched agent app:agent

- ``invoice-reminders`` gets its schedule from the ClaimSchedule in
  examples/claimschedules/invoice-reminders.yaml (weekdays at 09:00 Berlin time). For every
  overdue invoice it queues one reminder e-mail in the shop's outbox. The outbox row and the
  claimsched receipt commit in one transaction (``run.effect(key, conn=conn)``), so a reminder
  is queued once per occurrence even if a replica dies halfway and another one takes over.
- ``expire-carts`` is declared in code (every minute by default): it expires carts left open
  for more than 30 minutes, each inside ``with run.once(key) as first:``.

The shop's tables are in examples/app/schema.sql. The app reads and writes them with the same
least-privilege role its agent uses (`claimsched roles`).
"""

from __future__ import annotations

import os
from datetime import timedelta

import psycopg

from claimsched import Agent, Run

#: The shop's own database: the agent's by default.
APP_DSN = os.environ.get("APP_DSN") or os.environ.get("CLAIMSCHED_DSN", "")
#: How often carts are swept; the tests use a few seconds.
EXPIRE_CARTS_SCHEDULE = os.environ.get("EXPIRE_CARTS_SCHEDULE", "@every 1m")
#: Carts untouched for this long are expired.
CART_TIMEOUT = timedelta(minutes=int(os.environ.get("CART_TIMEOUT_MINUTES", "30")))

agent = Agent()


@agent.job("invoice-reminders")
def invoice_reminders(run: Run) -> None:
    """Queue one reminder for each invoice overdue at this occurrence."""
    with psycopg.connect(APP_DSN, autocommit=True) as conn:
        overdue = conn.execute(
            "SELECT id, customer_email FROM shop.invoices "
            "WHERE paid_at IS NULL AND due_date < %s::date ORDER BY id",
            [run.fire_time],
        ).fetchall()
    queued = 0
    for invoice_id, email in overdue:
        if run.lost.is_set():  # another replica owns this occurrence now: stop here
            run.log.warning("lease lost; stopping after %d reminder(s)", queued)
            return
        with psycopg.connect(APP_DSN) as conn:  # one transaction: the row and its receipt
            if run.effect(f"invoice-reminder:{invoice_id}", conn=conn):
                conn.execute(
                    "INSERT INTO shop.outbox (kind, recipient, subject, job_name, fire_time) "
                    "VALUES ('invoice-reminder', %s, %s, %s, %s)",
                    [email, f"Invoice {invoice_id} is overdue", run.job_name, run.fire_time],
                )
                queued += 1
    run.log.info("queued %d reminder(s) for %d overdue invoice(s)", queued, len(overdue))


@agent.job("expire-carts", schedule=EXPIRE_CARTS_SCHEDULE, lease_seconds=60,
           heartbeat_seconds=15, catch_up_policy="Latest")
def expire_carts(run: Run) -> None:
    """Expire open carts that nobody touched for CART_TIMEOUT."""
    with psycopg.connect(APP_DSN, autocommit=True) as conn:
        stale = [row[0] for row in conn.execute(
            "SELECT id FROM shop.carts WHERE status = 'open' AND updated_at < %s ORDER BY id",
            [run.fire_time - CART_TIMEOUT],
        )]
    for cart_id in stale:
        if run.lost.is_set():
            return
        # The receipt commits only if the block succeeds; a second attempt skips done carts.
        with run.once(f"cart-expired:{cart_id}") as first:
            if first:
                with psycopg.connect(APP_DSN) as conn:
                    conn.execute(
                        "UPDATE shop.carts SET status = 'expired', expired_by = %s "
                        "WHERE id = %s AND status = 'open'",
                        [f"{run.job_name}@{run.fire_time.isoformat()}", cart_id],
                    )
