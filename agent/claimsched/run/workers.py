"""Worker slots: run handlers (sync in threads, async on one event loop), record completions."""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .. import metrics
from ..errors import DatabaseError
from ..health import DatabaseHealth
from ..logs import AgentLog
from ..records import Completion, Lease, Status
from .effects import Effects, ReceiptBook
from .runs import Run
from .signals import Signals
from .supervisor import Supervisor

Handler = Callable[[Run], Any]


class Completions(Protocol):
    """Records finished runs in this agent's name."""

    def complete(self, done: Sequence[Completion]) -> dict[int, datetime | None]:
        """Returns {run id: retry_at or None} for the runs that were still owned."""
        ...


_NOTHING = object()
IDLE_SECONDS = 60.0  # a worker thread with nothing to run for this long ends
# Seconds a finished run waits for the others in flight (the runs of one claim end together,
# mostly) to be recorded by the same statement rather than one statement per run.
LINGER = 0.025


@dataclass
class Slot:
    """A run in progress and its lease bookkeeping (monotonic seconds)."""

    run: Run
    renewed_at: float
    deadline: float


class Workers:
    """At most `size` runs at once; finished runs are recorded in batches by the completer.

    Handlers run on worker threads that are kept between runs (a thread start per run costs
    more than a trivial handler) and end after IDLE_SECONDS without work. A new thread is
    started only when none is idle, so a handler that hangs after its lease was lost never
    holds up the runs that take its slot.

    A run goes by calls, with two hand-offs between threads: `begin` (on the claim loop's
    thread) makes its handle, whose receipts are written in `receipts` as `agent_id`, and hands
    its slot to a worker thread; `_execute` there runs the handler and hands the `Completion`
    to the completer, which records it with `completions.complete`. The workers signal
    `slot_freed` when a slot frees up, `retry_at` with the time a failed run will want an
    owner again, and `run_ended` with each finished run's lease once its completion statement
    has answered (recorded, or refused: the lease was lost).
    """

    def __init__(
        self,
        size: int,
        *,
        agent_id: str,
        receipts: ReceiptBook,
        completions: Completions,
        signals: Signals,
        log: AgentLog,
        health: DatabaseHealth,
        backoff_base: float,
    ) -> None:
        self.size = size
        self._agent_id = agent_id
        self._receipts = receipts
        self._completions = completions
        self._signals = signals
        self._log = log
        self._health = health
        self._backoff_base = backoff_base
        self._lock = threading.Lock()
        self._slots: dict[int, Slot] = {}
        self._done: queue.Queue[Completion | None] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._work: queue.SimpleQueue[tuple[Slot, Handler] | None] = queue.SimpleQueue()
        self._idle = 0  # worker threads waiting for work, less the work handed to them
        self._threads = 0
        self._closed = False
        self.refused = 0

    def free(self) -> int:
        with self._lock:
            return self.size - len(self._slots)

    def slots(self) -> list[Slot]:
        with self._lock:
            return list(self._slots.values())

    def start(self, supervisor: Supervisor) -> None:
        """Start the completer, on a watched thread of its own."""
        supervisor.spawn("claimsched-completer", self.completer)

    def stop(self) -> None:
        """Record what is left (the completer ends then), and let idle threads go."""
        self.close()

    def begin(self, lease: Lease, handler: Handler) -> Run:
        """Start `handler` on the run of `lease`, on a worker thread; returns its handle."""
        run = Run(lease, Effects(self._receipts, self._agent_id, lease), self._agent_id)
        now = time.monotonic()
        slot = Slot(run, renewed_at=now, deadline=now + lease.lease_seconds)
        with self._lock:
            self._slots[lease.id] = slot
            # Handed over under the lock, so an idle thread giving up sees it (see _serve).
            self._work.put((slot, handler))
            if self._idle:
                self._idle -= 1
                return run
            self._threads += 1
            name = f"claimsched-worker-{self._threads}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()
        return run

    def _serve(self) -> None:
        """A worker thread: run what it is handed until closed or idle for IDLE_SECONDS."""
        while True:
            try:
                item = self._work.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._work.empty():  # nothing was handed over meanwhile: end
                        self._idle -= 1
                        return
                continue
            if item is None:
                return
            self._execute(*item)
            with self._lock:
                if self._closed:
                    return
                self._idle += 1

    def abandon(self, run_id: int) -> Slot | None:
        """The run's lease is gone: free its slot (its handler may still be winding down)."""
        with self._lock:
            slot = self._slots.pop(run_id, None)
        if slot is not None:
            slot.run.lost.set()
            self._signals.slot_freed()
        return slot

    def _execute(self, slot: Slot, handler: Handler) -> None:
        run = slot.run
        lease = run.lease
        metrics.FIRE_TO_START.labels(lease.job_name).observe(
            max(0.0, lease.started_at.timestamp() - lease.fire_time.timestamp())
        )
        if self._log.isEnabledFor(logging.DEBUG):
            run.log.debug("run started", extra={"action": "start"})
        status: Status = "done"
        error = None
        began = time.monotonic()
        try:
            result = self._call(handler, run)
            if result is not None:
                run.log.warning("handler returned %r; return values are ignored", result)
        except BaseException as exc:  # the handler's failure is data, not our crash
            status, error = ended_by(run.lost.is_set()), describe(exc)
            if status == "fenced_out":
                run.log.warning("run fenced out, given back for its next attempt: %s", error,
                                extra={"action": "fenced_out"})
            else:
                run.log.warning("run failed: %s", error, extra={"action": "fail"})
        metrics.RUN_DURATION.labels(lease.job_name, status).observe(time.monotonic() - began)
        backoff = min(self._backoff_base * 2 ** max(lease.attempt - 1, 0), 300.0)
        self._done.put(Completion(lease, status, error, backoff))
        with self._lock:
            owned = self._slots.pop(lease.id, None) is not None
        if owned:
            self._signals.slot_freed()

    def _call(self, handler: Handler, run: Run) -> Any:
        result = handler(run)
        if not inspect.isawaitable(result):
            return result

        async def wait() -> Any:  # a coroutine, or any awaitable a sync handler returned
            return await result

        return asyncio.run_coroutine_threadsafe(wait(), self._event_loop()).result()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = loop = asyncio.new_event_loop()

                def serve() -> None:
                    loop.run_forever()
                    loop.close()

                threading.Thread(target=serve, name="claimsched-asyncio", daemon=True).start()
            return self._loop

    def completer(self) -> None:
        """Record finished runs, many per statement; retries while the database is down.

        On close it flushes what is left; if the database is still down then, those runs are
        left to their leases (they expire, are reclaimed, and effects stay idempotent).
        """
        pending: list[Completion] = []
        closing = False
        retry_in: float | None = None
        while not (closing and not pending):
            item: object
            try:
                item = self._done.get(timeout=retry_in)
            except queue.Empty:
                item = _NOTHING
            linger = time.monotonic() + LINGER
            while True:
                if item is None:
                    closing = True
                elif isinstance(item, Completion):
                    pending.append(item)
                wait = linger - time.monotonic()
                try:  # while other runs are in flight, they may join this statement
                    item = (self._done.get(timeout=wait) if wait > 0 and not closing
                            and self._in_flight(pending) else self._done.get_nowait())
                except queue.Empty:
                    break
            if not pending:
                continue
            try:
                recorded = self._completions.complete(pending)
            except DatabaseError as exc:
                retry_in = self._health.failed(exc)
                if closing:
                    self._log.error("%d completion(s) not recorded: %s", len(pending), exc)
                    return
                continue
            self._health.succeeded()
            retry_in = None
            for done in pending:
                self._recorded(done, done.lease.id in recorded, recorded.get(done.lease.id))
                self._signals.run_ended(done.lease)
            pending = []

    def _in_flight(self, pending: list[Completion]) -> bool:
        """Whether runs are in progress that are not among these finished ones."""
        with self._lock:
            return len(self._slots.keys() - {done.lease.id for done in pending}) > 0

    def _recorded(self, done: Completion, owned: bool, retry_at: datetime | None) -> None:
        lease = done.lease
        fields = {
            "job": lease.job_name,
            "fire_time": lease.fire_time.isoformat(),
            "attempt": lease.attempt,
        }
        if not owned:
            self.refused += 1
            metrics.COMPLETIONS_REFUSED.labels(lease.job_name).inc()
            self._log.warning(
                "completion refused: the lease was lost (the run was reclaimed or fenced out)",
                extra={**fields, "action": "fenced"},
            )
            return
        metrics.RUNS.labels(lease.job_name, done.status).inc()
        if done.status == "fenced_out":
            self._log.info("run given back for its next attempt", extra={
                **fields, "action": "given_back"})
        else:
            self._log.info("run %s", done.status, extra={**fields, "action": done.status})
        if retry_at is not None:
            self._signals.retry_at(retry_at)

    def close(self) -> None:
        self._done.put(None)
        with self._lock:
            self._closed = True
            for _ in range(self._idle):
                self._work.put(None)
            self._idle = 0
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


def ended_by(lost: bool) -> Status:
    """How a handler that raised ended: fenced out when its run had lost the lease by then
    (`run.lost`: set by the heartbeat, the watchdog, or a refused effect or once()), else
    failed. Being fenced out is not the job's failure: the run goes to its next attempt."""
    return "fenced_out" if lost else "failed"


def describe(exc: BaseException) -> str:
    """A handler's failure as text the database can store: never raises, no NUL, valid UTF-8."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose __str__ itself fails
        text = f"{type(exc).__name__}: (its message could not be printed)"
    text = text.replace("\x00", "\\0")[:2000]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
