"""The agent: runs inside every app replica, claims due occurrences, runs their handlers."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from types import FrameType, TracebackType
from typing import Any, TypeVar

from . import metrics
from .claims import SETTLED, Planner
from .clock import DbClock
from .db import (
    NOTIFY_RUNS,
    NOTIFY_SCHEDULES,
    SCHEMA_VERSION,
    Listener,
    Poller,
    SessionOptions,
    Store,
)
from .effects import Effects
from .errors import ClaimschedError, ConfigurationError, DatabaseError, InvalidSchedule
from .health import DatabaseHealth, retry_conflicts
from .heartbeat import Heartbeat
from .housekeeping import Housekeeper, presence
from .logs import AgentLog
from .records import Lease, describe_owner, released
from .runs import Run
from .schedules import Schedule
from .settings import AgentSettings
from .specs import JobSpec, ScheduleRecord, job_spec, validate_job_name
from .supervisor import Supervisor
from .workers import Handler, Workers

H = TypeVar("H", bound=Handler)

RETRY_WAIT = 0.5  # seconds before retrying an occurrence that was deferred (Forbid, busy)
NOT_DUE_WAIT = 0.01  # seconds before asking again when the database said "not due yet"
LISTEN_WAIT = 60.0  # seconds the listener blocks at most (stop and NOTIFY wake it earlier)
FULL_WAIT = 5.0  # seconds to sleep with every slot busy; a finishing run wakes the loop earlier
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
        base = settings or AgentSettings()
        changes = {k: v for k, v in overrides.items() if v is not None}
        if dsn is not None:
            changes["dsn"] = dsn
        if max_concurrency is not None:
            changes["max_concurrency"] = max_concurrency
        if agent_id is not None:
            changes["agent_id"] = agent_id
        self.settings = AgentSettings(**{**base.as_dict(), **changes})
        if pool is None and self.settings.dsn is None:
            raise ConfigurationError("no database: pass dsn= or pool=, or set CLAIMSCHED_DSN")
        self.agent_id = self.settings.agent_id or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        )
        given = self.settings
        self.store = Store(
            given.dsn.get_secret_value() if given.dsn else None,
            schema=given.schema_name,
            pool=pool,
            max_size=min(given.max_concurrency, 16) + 4,
            name=f"claimsched-{self.agent_id}",
            options=SessionOptions(
                statement_timeout=given.statement_timeout_seconds,
                lock_timeout=given.lock_timeout_seconds,
                idle_in_transaction_timeout=given.idle_in_transaction_timeout_seconds,
                tcp_keepalive=given.tcp_keepalive_seconds,
            ),
            listen_dsn=given.listen_dsn.get_secret_value() if given.listen_dsn else None,
            poll_seconds=given.poll_seconds,
        )
        self.log = AgentLog(logging.getLogger("claimsched.agent"), {"agent": self.agent_id})
        self.clock = DbClock()
        self.planner = Planner(misfire_grace=timedelta(seconds=self.settings.misfire_grace_seconds))
        self._handlers: dict[str, Handler] = {}
        self._handler_names: list[str] = []
        self._declared: dict[str, JobSpec] = {}
        self._schedules: dict[str, tuple[ScheduleRecord, Schedule]] = {}
        self._warned: set[str] = set()
        self._overridden: dict[str, str] = {}  # declared job -> the owner that overrides it
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._dirty = True  # any schedule may have changed
        self._changed: set[str] = set()  # these have (notifications named them)
        self._changed_lock = threading.Lock()
        self._reclaim = True
        self._catch_up = False
        self._next_retry: float | None = None
        self._refreshed_at = 0.0
        self.fatal: BaseException | None = None
        self._started = False
        self.supervisor = Supervisor(self.log, self._die)
        self.health = DatabaseHealth(self.log, self._recovered)
        agent_id = self.agent_id
        store = self.store
        self.workers = Workers(
            self.settings.max_concurrency,
            new_run=lambda lease: Run(lease, Effects(store.receipts, agent_id, lease), agent_id),
            complete=lambda done: store.complete(agent_id, done),
            log=self.log,
            health=self.health,
            on_change=self._wake.set,
            on_retry=self.retry_at,
            backoff_base=self.settings.retry_backoff_seconds,
        )
        self.heartbeat = Heartbeat(
            lambda leases: store.heartbeat(agent_id, leases), self.workers, self.log, self.health
        )
        about = presence(self.settings.housekeeping_seconds)
        self.housekeeper = Housekeeper(
            lambda: store.housekeeping(agent_id, self.handlers, about),
            period=self.settings.housekeeping_seconds,
            clock=self.clock,
            log=self.log,
            health=self.health,
            on_reaped=self.heartbeat.kick,
            on_claimable=self.want_reclaim,
        )
        self._listener: Listener | Poller | None = None
        self.store.identity.on_identity(lambda found: metrics.show_durability(found.durability))
        self.store.identity.on_failover(lambda before, now: self._failed_over())

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
            if name in self._handlers:
                raise ConfigurationError(f"job {name!r} already has a handler")
            self._handlers[name] = handler
            if schedule is not None:
                self._declared[name] = declared
            return handler

        return register

    @property
    def handlers(self) -> list[str]:
        """The jobs this agent has handlers for, sorted (kept: with 100,000 jobs, sorting them
        for every housekeeping and reclaim statement was a cost of its own)."""
        if len(self._handler_names) != len(self._handlers):  # handlers are only ever added
            self._handler_names = sorted(self._handlers)
        return self._handler_names

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, migrate if allowed, declare code schedules, start the background threads."""
        if self._started:
            return
        if not self._handlers:
            raise ConfigurationError("the agent has no jobs: register handlers with @agent.job")
        if self.settings.metrics_port is not None:
            metrics.require()
        self.store.open(timeout=10.0)
        self._listener = self.store.listener(self.handlers)
        try:
            # LISTEN before the first schedule read: no change can slip in between.
            self._listener.listen()
            # A conflict with another transaction (a deadlock) is transient: each step is
            # retried, and an agent never stops for one.
            if self.settings.migrate:
                found = retry_conflicts(self.store.schema_version)
                if found is None or found < SCHEMA_VERSION:
                    self.store.migrate()  # retries its conflicts itself
            retry_conflicts(self.store.check_version)
            for spec in self._declared.values():
                self._declare(spec)
            retry_conflicts(self.housekeeper.once)
        except BaseException:
            self._listener.dispose()
            self.store.close()
            raise
        self._started = True
        if self.settings.metrics_port is not None:
            metrics.serve(self.settings.metrics_port)
        self.supervisor.spawn("claimsched-claims", self._claim_loop)
        self.supervisor.spawn("claimsched-heartbeat", lambda: self.heartbeat.loop(self._stopping))
        self.supervisor.spawn("claimsched-watchdog", lambda: self.heartbeat.watch(self._stopping))
        self.supervisor.spawn(
            "claimsched-housekeeping", lambda: self.housekeeper.loop(self._stopping)
        )
        self.supervisor.spawn("claimsched-listener", self._listen_loop)
        self.supervisor.spawn(
            "claimsched-completer", lambda: self.workers.completer(self._stopping)
        )
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
        self._stopping.set()
        self._wake.set()
        self.heartbeat.kick()
        if self._listener is not None:
            self._listener.interrupt()
        self.store.give_up_at(end)
        # A claim pass may be waiting for the database; once it gets a connection it sees
        # _stopping and claims nothing, so there is no need to wait for it here.
        self.supervisor.join_one("claimsched-claims", max(0.0, grace_end - time.monotonic()))
        while self.workers.slots() and time.monotonic() < grace_end:
            time.sleep(0.05)
        unfinished = self.workers.slots()
        if unfinished:
            self._hand_back([slot.run.lease.id for slot in unfinished])
        self.workers.close()
        self.supervisor.join(until=end)
        with contextlib.suppress(ClaimschedError):
            self.store.agent_stopped(self.agent_id)
        self.store.close()
        self.log.info("agent stopped", extra={"action": "stop"})

    def _hand_back(self, ids: list[int]) -> None:
        for run_id in ids:
            self.workers.abandon(run_id)
        try:
            released = self.store.release(self.agent_id, ids)
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
            self._stopping.set()
            self._wake.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            while not self._stopping.wait(1.0):
                pass
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 1 if self.fatal else 0

    def _die(self, exc: BaseException) -> None:
        self.fatal = exc
        self._stopping.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.interrupt()

    def _failed_over(self) -> None:
        """The database is another one now (a standby was promoted): what the old primary
        acknowledged last may be gone. The heartbeat re-reads every run in flight at once (a
        run whose row is gone, or no longer ours, is lost) and the claim loop catches up."""
        self.heartbeat.kick()
        self._recovered()

    def _recovered(self) -> None:
        self._catch_up = True
        self._dirty = True
        self._reclaim = True
        self._wake.set()

    def want_reclaim(self) -> None:
        """Runs may want an owner (orphans, requests, retries): look on the next pass, now."""
        self._reclaim = True
        self._wake.set()

    def retry_at(self, when: datetime) -> None:
        """A failed run will want an owner at `when`: wake up then to reclaim it."""
        at = time.monotonic() + max(0.0, self.clock.seconds_until(when))
        self._next_retry = at if self._next_retry is None else min(self._next_retry, at)
        self._wake.set()

    # -- the claim loop ----------------------------------------------------------------------

    def _claim_loop(self) -> None:
        delay = 0.0
        while not self._stopping.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                delay = self._claim_pass()
                self.health.succeeded()
            except DatabaseError as exc:
                delay = self.health.failed(exc)

    def _claim_pass(self) -> float:
        """One wake-up: re-read schedules if needed, reclaim, claim. Returns seconds to sleep."""
        if self._catch_up:
            self._catch_up = False
            self.planner.forget()
        if (
            self._dirty
            or self._changed
            or time.monotonic() - self._refreshed_at > self.settings.schedule_refresh_seconds
        ):
            self._refresh_schedules()
        if self._next_retry is not None and time.monotonic() >= self._next_retry:
            self._next_retry, self._reclaim = None, True
        if self._reclaim and self.workers.free():
            self._reclaim = False
            for lease in self.store.reclaim(
                self.agent_id, self.handlers, self.workers.free(), self._claiming
            ):
                metrics.RECLAIMS.labels(lease.job_name).inc()
                self._start(lease, "reclaimed")
        capacity = self.workers.free()
        if not capacity:
            return FULL_WAIT  # a finishing run wakes the loop
        if not self._schedules:
            return self._sleep_seconds()
        candidates = self.planner.plan(self._schedules, self.clock.now(), capacity)
        if not candidates:
            return self._sleep_seconds()
        sent = time.time()
        claimed = self.store.claim(self.agent_id, candidates, capacity, self._claiming)
        if claimed is None:
            return 0.0  # stopping: the loop ends
        db_now, results = claimed
        self.clock.observe(db_now, sent, time.time())
        for result in results:
            metrics.CLAIMS.labels(result.job_name, result.outcome).inc()
            if result.lease is not None:
                self._start(result.lease, "claimed")
        blocked = self.planner.learn(results)
        if "stale" in blocked:  # the schedule changed since we read it: read it, plan again
            self._schedules_changed({r.job_name for r in results if r.outcome == "stale"})
            return 0.0
        if "not_due" in blocked:
            return NOT_DUE_WAIT  # our clock estimate ran ahead; the offset is corrected now
        progressed = any(result.outcome in SETTLED for result in results)
        if "no_capacity" in blocked or (self.planner.truncated and progressed):
            # Races lost to other replicas left slots free: try the remaining ones at once.
            return 0.0 if self.workers.free() else FULL_WAIT
        if "deferred" in blocked:
            return RETRY_WAIT
        return self._sleep_seconds()

    def _claiming(self) -> bool:
        return not self._stopping.is_set()

    def _sleep_seconds(self) -> float:
        delay = self.settings.schedule_refresh_seconds
        nxt = self.planner.next_due(self._schedules, self.clock.now())
        if nxt is not None:
            delay = min(
                delay,
                self.clock.seconds_until(nxt) + random.uniform(0, self.settings.jitter_seconds),
            )
        if self._next_retry is not None:
            delay = min(delay, self._next_retry - time.monotonic())
        return max(0.0, delay)

    def _start(self, lease: Lease, how: str) -> None:
        late = (lease.started_at - lease.fire_time).total_seconds()
        if how == "claimed" and late > 2 * max(self.settings.jitter_seconds, 1.0):
            metrics.CATCH_UP.labels(lease.job_name).inc()
        self.log.debug(
            "%s %s",
            how,
            lease.job_name,
            extra={
                "job": lease.job_name,
                "fire_time": lease.fire_time.isoformat(),
                "attempt": lease.attempt,
                "action": how,
            },
        )
        self.workers.start(lease, self._handlers[lease.job_name])

    def _declare(self, spec: JobSpec) -> None:
        """Write a code declaration (at start, and when its row was released or is gone)."""
        written = retry_conflicts(functools.partial(self.store.upsert_schedule, spec))
        self._owned_by(spec.job_name, written.held_by)

    def _owned_by(self, name: str, held_by: str | None) -> None:
        """Say so, once per owner, when another owner overrides a declaration in code."""
        if held_by is None:
            self._overridden.pop(name, None)
        elif self._overridden.get(name) != held_by:
            self._overridden[name] = held_by
            self.log.warning(
                "job %s: its declaration in code is overridden by %s, whose schedule runs; "
                "it applies again once that owner releases the job", name, held_by,
                extra={"job": name, "owner": held_by, "action": "overridden"},
            )

    def _schedules_changed(self, names: set[str] | None) -> None:
        """Read these schedules again on the next pass (None: any may have changed)."""
        if names is None:
            self._dirty = True
        else:
            with self._changed_lock:
                self._changed |= names
        self._wake.set()

    def _refresh_schedules(self) -> None:
        """Read the schedules that changed: those notifications named, or, when any may have
        (start, reconnection, the periodic re-read), those whose last change is not the one
        held. Unchanged ones keep their entry: the planner looks only at the new ones."""
        with self._changed_lock:
            names, self._changed = self._changed, set()
        held = self._schedules
        if self._dirty or time.monotonic() - self._refreshed_at > \
                self.settings.schedule_refresh_seconds:
            self._dirty = False
            self._refreshed_at = time.monotonic()
            if not held:
                names = set(self._handlers)
            else:
                versions = self.store.schedule_versions()
                names |= {name for name in self._handlers if versions.get(name) != (
                    held[name][0].updated_at if name in held else None)}
        names &= self._handlers.keys()
        if not names:
            return
        records = self._read(names)
        orphaned = [spec for name, spec in self._declared.items() if name in names and (
            name not in records or released(records[name].source, records[name].owner))]
        for spec in orphaned:  # a ClaimSchedule let go of it: the declaration takes it back
            self._declare(spec)
        if orphaned:
            records = self._read(names)
        for name in self._declared.keys() & records.keys():
            found = records[name]
            self._owned_by(name, None if found.source == "code"
                           else describe_owner(found.source, found.owner))
        schedules = dict(held)  # a new mapping: the planner sees which entries are new
        for name in sorted(names):
            record = records.get(name)
            schedules.pop(name, None)
            if record is None:
                if name not in self._warned:
                    self._warned.add(name)
                    self.log.warning(
                        "job %s has a handler but no schedule yet; it will run once one exists",
                        name,
                        extra={"job": name, "action": "no_schedule"},
                    )
                continue
            if name in held and held[name][0] == record:
                schedules[name] = held[name]
                continue
            try:
                schedules[name] = (record, record.parsed)
            except InvalidSchedule as exc:
                self.log.error("job %s: stored schedule is invalid: %s", name, exc)
        self._schedules = schedules

    def _read(self, names: set[str]) -> dict[str, ScheduleRecord]:
        """The rows of these schedules: all of them at once when that is most of them."""
        everything = len(names) * 2 > len(self._schedules) and len(names) > 1000
        found = self.store.load_schedules(None if everything else sorted(names))
        return {r.job_name: r for r in found if r.job_name in names}

    # -- housekeeping and notifications ------------------------------------------------------

    def _listen_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        try:
            while not self._stopping.is_set():
                try:
                    fired = listener.wait(LISTEN_WAIT)
                except DatabaseError as exc:
                    self._stopping.wait(self.health.failed(exc))
                    continue
                if NOTIFY_SCHEDULES in fired:
                    self._schedules_changed(listener.changed())
                if NOTIFY_RUNS in fired:
                    self.want_reclaim()
                    self.heartbeat.kick()
        finally:
            listener.dispose()
