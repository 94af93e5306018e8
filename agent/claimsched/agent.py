"""The agent: runs inside every app replica, claims due occurrences, runs their handlers."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from types import FrameType, TracebackType
from typing import Any, TypeVar

from . import memory, metrics
from .clock import DbClock
from .db import AGENT_API, SCHEMA_VERSION, SessionOptions, Store
from .errors import ClaimschedError, ConfigurationError, DatabaseAway
from .health import DatabaseHealth, retry_away, retry_conflicts
from .logs import AgentLog
from .plan.cursors import Cursors
from .plan.handlers import Handlers
from .plan.planner import Planner
from .plan.turns import Turns
from .records import DatabaseIdentity, Lease
from .run.heartbeat import Heartbeat
from .run.housekeeping import Housekeeper, presence
from .run.loop import Claimer
from .run.notifications import Notifications
from .run.signals import Signals
from .run.statements import Statements
from .run.supervisor import Service, Supervisor
from .run.workers import Handler, Workers
from .schedule.specs import JobSpec, job_spec, validate_job_name
from .settings import AgentSettings

H = TypeVar("H", bound=Handler)

STOP_MARGIN = 5.0  # seconds past the grace that stop() may spend handing back and signing off


class Agent:
    """Claims and runs this app's scheduled jobs, exactly once across all replicas."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: Any = None,
        agent_id: str | None = None,
        max_concurrency: int | None = None,
        settings: AgentSettings | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = _settings(settings, dsn, agent_id, max_concurrency, overrides)
        memory.keep_large_blocks_apart()  # before the app registers 100,000 handlers
        if pool is None and self.settings.dsn is None:
            raise ConfigurationError("no database: pass dsn= or pool=, or set CLAIMSCHED_DSN")
        given = self.settings
        self.agent_id = agent_id = given.agent_id or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        )
        self.store = store = _store(given, pool, agent_id)
        self.log = AgentLog(logging.getLogger("claimsched.agent"), {"agent": agent_id})
        self.clock = DbClock()
        self._handlers = Handlers[Handler]()
        self._declared: dict[str, JobSpec] = {}
        self.signals = signals = Signals(self.clock)
        self.fatal: BaseException | None = None
        self._started = False
        self.supervisor = Supervisor(self.log, self._die)
        self.health = DatabaseHealth(self.log, signals.recovered)
        statements = Statements(store.claims, agent_id, self._handlers,
                                presence(given.housekeeping_seconds))
        self.workers = Workers(
            given.max_concurrency, agent_id=agent_id, receipts=store.receipts,
            completions=statements, signals=signals, log=self.log, health=self.health,
            backoff_base=given.retry_backoff_seconds,
        )
        self.heartbeat = Heartbeat(statements, self.workers, self.health, signals)
        turns = Turns(agent_id, handoff=timedelta(seconds=given.handoff_seconds))
        self.housekeeper = Housekeeper(
            statements, period=given.housekeeping_seconds, clock=self.clock, log=self.log,
            health=self.health, signals=signals, turns=turns,
        )
        self.claimer = Claimer(
            store=store, agent_id=agent_id, handlers=self._handlers, declared=self._declared,
            workers=self.workers, housekeeper=self.housekeeper,
            planner=Planner(misfire_grace=timedelta(seconds=given.misfire_grace_seconds),
                            turns=turns, cursors=Cursors(self._handlers)),
            clock=self.clock, log=self.log, health=self.health, signals=signals,
            refresh_seconds=given.schedule_refresh_seconds, jitter_seconds=given.jitter_seconds,
        )
        self.notifications = Notifications(
            store, agent_id, self.claimer, self.heartbeat, self.housekeeper, self.health, signals)
        store.identity.on_identity(_show_durability)
        store.identity.on_failover(self._failed_over)

    # -- registration ------------------------------------------------------------------------

    def job(self, name: str, schedule: str | None = None, **spec: Any) -> Callable[[H], H]:
        """Register the handler of job `name`; with `schedule`, also declare its schedule."""
        if schedule is not None:
            declared = job_spec(job_name=name, schedule=schedule, source="code", **spec)
        elif spec:
            raise ConfigurationError(f"job {name!r}: schedule settings need a schedule=")
        else:
            validate_job_name(name)
        if self._started:
            raise ConfigurationError("register jobs before the agent starts")

        def register(handler: H) -> H:
            if not self._handlers.add(name, handler):
                raise ConfigurationError(f"job {name!r} already has a handler")
            if schedule is not None:
                self._declared[name] = declared
            return handler

        return register

    @property
    def handlers(self) -> list[str]:
        """The jobs this agent has handlers for, sorted."""
        return self.claimer.names

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, migrate if allowed, declare code schedules, start the background threads."""
        if self._started:
            return
        if not self._handlers:
            raise ConfigurationError("the agent has no jobs: register handlers with @agent.job")
        if self.settings.metrics_port is not None:
            metrics.require()
        # A database that is away (restarting, failing over) is waited for, as a pool would.
        retry_away(lambda: self.store.open(timeout=10.0), self.settings.start_timeout_seconds,
                   self.log, self.signals.stopping)
        try:
            self.notifications.listen()  # before the first schedule read
            # A conflict with another transaction (a deadlock) is transient: each step is
            # retried, and an agent never stops for one.
            if self.settings.migrate:
                found = retry_conflicts(self.store.admin.schema_version)
                if found is None or found < SCHEMA_VERSION:
                    self.store.admin.migrate()  # retries its conflicts itself
            retry_conflicts(lambda: self.store.admin.check_version(AGENT_API))
            for spec in self._declared.values():
                self.claimer.declare(spec)
            retry_conflicts(self.housekeeper.once)
        except BaseException:
            self.notifications.dispose()
            self.store.close()
            raise
        self._started = True
        if self.settings.metrics_port is not None:
            metrics.serve(self.settings.metrics_port)
        for service in self._services():
            service.start(self.supervisor)
        self.workers.start(self.supervisor)
        self.log.info(
            "agent started with %d job handler(s): %s",
            len(self._handlers),
            ", ".join(self.handlers),
            extra={"action": "start"},
        )

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming; let running handlers finish within the grace; hand back the rest.

        Bounded even while the database is away: it returns within the grace plus STOP_MARGIN.
        """
        if not self._started:
            return
        self._started = False
        grace = self.settings.shutdown_grace_seconds if grace is None else grace
        grace_end = time.monotonic() + grace
        end = grace_end + STOP_MARGIN
        self.signals.stopping.set()
        for service in self._services():
            service.stop()
        self.store.give_up_at(end)
        # A claim pass may be waiting for the database; once it gets a connection it sees
        # the agent stopping and claims nothing, so there is no need to wait for it here.
        self.supervisor.join_one("claimsched-claims", max(0.0, grace_end - time.monotonic()))
        while self.workers.slots() and time.monotonic() < grace_end:
            time.sleep(0.05)
        unfinished = self.workers.slots()
        if unfinished:
            self._hand_back([slot.run.lease for slot in unfinished])
        self.workers.stop()
        self.supervisor.join(until=end)
        with contextlib.suppress(ClaimschedError):
            self.store.claims.agent_stopped(self.agent_id)
        self.store.close()
        self.log.info("agent stopped", extra={"action": "stop"})

    def _hand_back(self, leases: list[Lease]) -> None:
        for lease in leases:
            self.workers.abandon(lease.id)
        try:
            released = self.store.claims.release(self.agent_id, leases)
            self.housekeeper.once()
            self.log.warning(
                "handed %d unfinished run(s) back for another replica",
                released,
                extra={"action": "hand_off"},
            )
        except ClaimschedError as exc:
            self.log.error("could not hand runs back (their leases will expire): %s", exc)

    def __enter__(self) -> Agent:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def run_forever(self) -> int:
        """Run until SIGTERM or SIGINT; then shut down gracefully. Returns an exit code."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.log.info("received %s, shutting down", signal.Signals(signum).name)
            self.signals.stopping.set()
            self.claimer.stop()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            try:
                self.start()
            except DatabaseAway:
                if self.signals.stopping.is_set():  # told to stop while waiting for the database
                    return 0
                raise
            while not self.signals.stopping.wait(1.0):
                pass
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 1 if self.fatal else 0

    def _die(self, exc: BaseException) -> None:
        self.fatal = exc
        self.signals.stopping.set()
        self.claimer.stop()
        self.notifications.stop()

    def _services(self) -> tuple[Service, ...]:
        """The services that start and stop first, in this order; the workers start after them
        and stop once their runs have ended or been handed back."""
        return (self.claimer, self.heartbeat, self.housekeeper, self.notifications)

    def _failed_over(self, before: DatabaseIdentity, now: DatabaseIdentity) -> None:
        """The database is another one now (a standby was promoted): what the old primary
        acknowledged last may be gone. The heartbeat re-reads every run in flight at once (a
        run whose row is gone, or no longer ours, is lost) and the claim loop catches up."""
        self.heartbeat.kick()
        self.signals.recovered()


def _settings(settings: AgentSettings | None, dsn: str | None, agent_id: str | None,
              max_concurrency: int | None, overrides: dict[str, Any]) -> AgentSettings:
    """The agent's settings: `settings` (or the environment's), with what was passed over them."""
    base = settings or AgentSettings()
    changes = {k: v for k, v in overrides.items() if v is not None}
    if dsn is not None:
        changes["dsn"] = dsn
    if max_concurrency is not None:
        changes["max_concurrency"] = max_concurrency
    if agent_id is not None:
        changes["agent_id"] = agent_id
    return AgentSettings(**{**base.as_dict(), **changes})


def _store(given: AgentSettings, pool: Any, agent_id: str) -> Store:
    """The agent's store, on `pool` when one is given, else on its own pool of `given.dsn`."""
    return Store(
        given.dsn.get_secret_value() if given.dsn else None,
        schema=given.schema_name,
        pool=pool,
        max_size=min(given.max_concurrency, 16) + 4,
        name=f"claimsched-{agent_id}",
        options=SessionOptions(
            statement_timeout=given.statement_timeout_seconds,
            lock_timeout=given.lock_timeout_seconds,
            idle_in_transaction_timeout=given.idle_in_transaction_timeout_seconds,
            tcp_keepalive=given.tcp_keepalive_seconds,
        ),
        listen_dsn=given.listen_dsn.get_secret_value() if given.listen_dsn else None,
        poll_seconds=given.poll_seconds,
    )


def _show_durability(found: DatabaseIdentity) -> None:
    metrics.show_durability(found.durability)
