"""The demo's replicas: the app each one runs (`claimsched agent claimsched.demo_app:agent`),
and the fleet of processes the demo starts, signals and stops.

Two jobs, both recording their side effects through receipts (`run.effect(key, conn=...)`) in
the same transaction as a row of the demo's own ledger table, so a duplicated side effect would
show up as two ledger rows:

- `customer-report` (@every 2s) sends one report to each of five fake customers.
- `settle-invoices` (@every 5s) settles three batches, one second apart: slow enough to be
  killed or paused in the middle.

The agent is built on first access (so `claimsched.demo` can import the job definitions
without a database); it reads CLAIMSCHED_DSN, CLAIMSCHED_SCHEMA, CLAIMSCHED_AGENT_ID, ...
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .agent import Agent
from .errors import LeaseLost
from .processes import spawn_agent
from .runs import Run
from .specs import JobSpec, job_spec

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
RECEIPT_COUNT = "SELECT count(*) FROM job_effects WHERE job_name = ANY(%s)"
SCHEMA_MARKER = "claimsched demo: safe to drop"
DROP_SCHEMA = "DROP SCHEMA {} CASCADE"
MARK_SCHEMA = "COMMENT ON SCHEMA {} IS {}"
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


# -- the fleet: the demo's side ------------------------------------------------------------

AGENT_ENV = {
    "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",  # the reaper runs every half second
    "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": "5",
    "CLAIMSCHED_JITTER_SECONDS": "0.25",  # spreads the wins over the replicas
    "CLAIMSCHED_LOG_LEVEL": "INFO",
}


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: replicas get SIGKILL if the demo itself is killed (no strays, even then)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    kill = int(signal.SIGKILL)
    return lambda: prctl(1, kill)  # PR_SET_PDEATHSIG


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    state: str = "running"

    def signal(self, signum: int) -> None:
        """Signal the replica's process group (never a pid that was already reaped)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)


class Fleet:
    """Agent processes running this module, each in its own session and process group."""

    def __init__(self, dsn: str, schema: str, folder: Path) -> None:
        self.dsn, self.schema, self.folder = dsn, schema, folder
        self.replicas: dict[str, Replica] = {}
        self._preexec = _die_with_parent()

    def start(self, name: str) -> Replica:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
        env.update(AGENT_ENV, CLAIMSCHED_DSN=self.dsn, CLAIMSCHED_SCHEMA=self.schema,
                   CLAIMSCHED_AGENT_ID=name)
        log = self.folder / f"{name}.log"
        process = spawn_agent(
            f"{__name__}:agent", env, log,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=self._preexec,
        )
        replica = self.replicas[name] = Replica(name, process, log)
        return replica

    def up(self, name: str | None) -> bool:
        replica = self.replicas.get(name or "")
        return replica is not None and replica.state == "running"

    def stop(self, grace: float) -> None:
        """SIGTERM (after SIGCONT) to every live replica, wait, then SIGKILL the stragglers."""
        alive = [r for r in self.replicas.values() if r.process.poll() is None]
        for replica in alive:
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for replica in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.process.wait(max(0.1, deadline - time.monotonic()))
        self.kill()
        for replica in alive:
            replica.state = "stopped"

    def kill(self) -> None:
        for replica in self.replicas.values():
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.process.wait(10)


_agent: Agent | None = None


def __getattr__(name: str) -> Any:
    global _agent
    if name != "agent":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _agent is None:
        _agent = _build()
    return _agent
