"""The jobs every demo replica runs (`claimsched agent claimsched.tools.demo.app:agent`).

Two jobs, both recording their side effects through receipts (`run.effect(key, conn=...)`) in
the same transaction as a row of the demo's own ledger table, so a duplicated side effect would
show up as two ledger rows:

- `customer-report` (@every 2s) sends one report to each of five fake customers.
- `settle-invoices` (@every 5s) settles three batches, one second apart: slow enough to be
  killed or paused in the middle.

The agent is built on first access (so the demo can import the job definitions without a
database); it reads CLAIMSCHED_DSN, CLAIMSCHED_SCHEMA, CLAIMSCHED_AGENT_ID, ...
"""

from __future__ import annotations

import time
from typing import Any

from ...agent import Agent
from ...errors import LeaseLost
from ...run.runs import Run
from ...schedule.specs import JobSpec, job_spec

REPORT = "customer-report"
SETTLE = "settle-invoices"
CUSTOMERS = ("acme", "globex", "initech", "umbrella", "hooli")
BATCHES = ("batch-1", "batch-2", "batch-3")
BATCH_SECONDS = 1.0

LEASE_SECONDS = 4
# Short leases and a fast reaper (set by the demo) so a kill or a pause resolves in seconds.
_COMMON: dict[str, Any] = {
    "lease_seconds": LEASE_SECONDS,
    "heartbeat_seconds": 1,
    "max_attempts": 5,
    "concurrency_policy": "Allow",
    "catch_up_policy": "All",
    "catch_up_window_seconds": 600,
}
SCHEDULES: dict[str, str] = {REPORT: "@every 2s", SETTLE: "@every 5s"}
# Side effects one finished occurrence of each job has made.
EFFECTS: dict[str, tuple[str, ...]] = {REPORT: CUSTOMERS, SETTLE: BATCHES}

# The demo's SQL, all of it: its ledger lives in the demo's schema (the search_path's first).
LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS demo_ledger (
    job text NOT NULL,
    fire_time timestamptz NOT NULL,
    entity text NOT NULL,
    agent text NOT NULL,
    attempt integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""
LEDGER_INSERT = (
    "INSERT INTO demo_ledger (job, fire_time, entity, agent, attempt) VALUES (%s, %s, %s, %s, %s)"
)
LEDGER_ROWS = (
    "SELECT job, fire_time, entity, agent, attempt FROM demo_ledger ORDER BY fire_time, recorded_at"
)
SCHEMA_MARKER = "claimsched demo: safe to drop"
DROP_SCHEMA = "DROP SCHEMA {} CASCADE"
MARK_SCHEMA = "COMMENT ON SCHEMA {} IS {marker}"
SCHEMA_COMMENT = (
    "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s"
)


def specs() -> list[JobSpec]:
    """The demo's schedules, exactly as the replicas declare them in code."""
    return [
        job_spec(job_name=name, schedule=schedule, source="code", **_COMMON)
        for name, schedule in SCHEDULES.items()
    ]


def _record(agent: Agent, run: Run, entity: str) -> bool:
    """The side effect and its receipt in one transaction; False if an earlier attempt did it."""
    with agent.store.connection() as conn, conn.transaction():
        if not run.effect(entity, conn=conn):
            return False
        row = [run.job_name, run.fire_time, entity, run.agent_id, run.attempt]
        conn.execute(LEDGER_INSERT, row)
        return True


def _build() -> Agent:
    agent = Agent()

    @agent.job(REPORT, SCHEDULES[REPORT], **_COMMON)
    def customer_report(run: Run) -> None:
        try:
            for customer in CUSTOMERS:
                _record(agent, run, customer)
                time.sleep(0.05)
        except LeaseLost as exc:
            run.log.warning("effect refused: %s", exc, extra={"action": "effect_refused"})

    @agent.job(SETTLE, SCHEDULES[SETTLE], **_COMMON)
    def settle_invoices(run: Run) -> None:
        # Deliberately does not look at run.lost: even a handler that ignores it cannot
        # settle a batch once another replica owns the occurrence (its effect is refused).
        for batch in BATCHES:
            time.sleep(BATCH_SECONDS)
            try:
                fresh = _record(agent, run, batch)
            except LeaseLost as exc:
                run.log.warning("effect refused: %s", exc, extra={"action": "effect_refused"})
                return
            if not fresh:
                run.log.info(
                    "%s was settled by an earlier attempt: not repeated", batch,
                    extra={"action": "effect_kept"},
                )

    return agent


_agent: Agent | None = None


def __getattr__(name: str) -> Any:
    global _agent
    if name != "agent":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _agent is None:
        _agent = _build()
    return _agent
