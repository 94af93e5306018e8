"""The app the process tests and chaos storms run: an Agent whose jobs come from APP_JOBS (JSON).

Each job's handler records that it started (public.starts), optionally records the effect
`before`, sleeps `sleep` seconds, then records the effect `after`. Effects go through
`run.effect(key, conn=...)` in the same transaction as a row in public.ledger, so the ledger
holds exactly the side effects that really happened.

Jobs with `"kind": "chaos"` (the randomized chaos harness) get a richer handler: one connection
per run, long sleeps that stop as soon as `run.lost` is set, planned failures on chosen attempts,
a `run.once(key)` block that calls an "external API" (public.external_calls, with the run's
idempotency key) and writes a ledger row committed only after the block's receipt did, and
`tail` seconds of work after the last effect. With APP_TRACE_DIR set, each handler appends its
start and end (monotonic clock: a skewed replica's wall clock lies) to a trace file there; and a
handler of a `freeze` job that finds the file `freeze-<job>` there inside its once() block takes
it (renames it `frozen-<job>-<pid>`) and SIGSTOPs its own process, for the harness to resume;
a handler beginning its tail takes the file `outage-wanted` (renames it `outage-now`): the
harness stops Postgres then.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import threading
import time
from typing import Any

import psycopg

from claimsched import Agent, Run

DSN = os.environ["CLAIMSCHED_DSN"]  # through a pooler on some replicas: nothing prepared

agent = Agent()

# `kill -USR1` dumps every thread's stack to the log: how the harness shows where a replica hangs
faulthandler.register(signal.SIGUSR1, all_threads=True)

HANDLER_KEYS = {
    "name",
    "schedule",
    "before",
    "after",
    "sleep",
    "fail",
    # chaos handlers
    "kind",
    "period",
    "once",
    "once_sleep",
    "fail_every",
    "fail_attempts",
    "tail",
    "freeze",
}
TRACE_DIR = os.environ.get("APP_TRACE_DIR")
_trace_fd: int | None = None


def _effect(run: Run, key: str) -> None:
    with psycopg.connect(DSN, prepare_threshold=None) as conn:
        if run.effect(key, conn=conn):
            conn.execute(
                "INSERT INTO public.ledger VALUES (%s, %s, %s, %s, %s)",
                [run.job_name, run.fire_time, key, run.agent_id, run.attempt],
            )


def _handler(spec: dict[str, Any]) -> Any:
    def handle(run: Run) -> None:
        with psycopg.connect(DSN, autocommit=True, prepare_threshold=None) as conn:
            conn.execute(
                "INSERT INTO public.starts (job, fire_time, agent, attempt) "
                "VALUES (%s, %s, %s, %s)",
                [run.job_name, run.fire_time, run.agent_id, run.attempt],
            )
        if spec.get("before"):
            _effect(run, spec["before"])
        time.sleep(float(spec.get("sleep", 0)))
        if spec.get("fail"):
            raise RuntimeError("the handler failed on purpose")
        if spec.get("after"):
            _effect(run, spec["after"])

    return handle


# -- chaos handlers ----------------------------------------------------------------------------


class Abandoned(Exception):
    """The run lost its lease while the handler was working: stop without committing."""


def _work(run: Run, seconds: float) -> None:
    """Sleep `seconds` in small steps, like real work that checks `run.lost` now and then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if run.lost.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            raise Abandoned(f"lease lost after {seconds - (deadline - time.monotonic()):.1f}s")


def _chaos_effect(conn: psycopg.Connection[Any], run: Run, key: str) -> None:
    """The receipt and the app's own write commit together, or not at all."""
    with conn.transaction():
        if run.effect(key, conn=conn):
            conn.execute(
                "INSERT INTO public.ledger VALUES (%s, %s, %s, %s, %s)",
                [run.job_name, run.fire_time, key, run.agent_id, run.attempt],
            )


def _trace(run: Run, event: str, **more: Any) -> None:
    """One line per event, appended with one write (atomic under O_APPEND; survives SIGKILL)."""
    global _trace_fd
    if TRACE_DIR is None:
        return
    if _trace_fd is None:
        path = os.path.join(TRACE_DIR, f"trace-{run.agent_id}-{os.getpid()}.jsonl")
        _trace_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = {
        "event": event,
        "job": run.job_name,
        "fire_time": run.fire_time.isoformat(),
        "attempt": run.attempt,
        "agent": run.agent_id,
        "mono": time.monotonic(),
        **more,
    }
    os.write(_trace_fd, (json.dumps(line) + "\n").encode())


def _freeze_if_asked(run: Run) -> None:
    """Take the harness's freeze-<job> file, if there is one, and stop this whole process."""
    if TRACE_DIR is None:
        return
    flag = os.path.join(TRACE_DIR, f"freeze-{run.job_name}")
    try:
        os.rename(flag, os.path.join(TRACE_DIR, f"frozen-{run.job_name}-{os.getpid()}"))
    except FileNotFoundError:
        return
    _trace(run, "frozen", pid=os.getpid())
    # Stop this thread first: a SIGSTOP sent to the process is taken by its main thread, and
    # this one would run on (long enough to commit the once() block) until that stops it too.
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def _chaos_once(
    conn: psycopg.Connection[Any], run: Run, spec: dict[str, Any], key: str, seconds: float
) -> None:
    """`run.once`: the external call happens inside the block, with the run's idempotency key
    (at least once: a block that dies before its receipt commits runs again); the ledger row is
    written inside the block and committed only after the block's receipt committed, so a block
    that dies leaves neither behind."""
    with psycopg.connect(DSN, connect_timeout=3, prepare_threshold=None) as ledger:
        with run.once(key) as first:
            if first:
                _work(run, seconds)
                conn.execute(
                    "INSERT INTO public.external_calls VALUES (%s, %s, %s, %s, %s, %s)",
                    [run.job_name, run.fire_time, key, run.idempotency_key(key), run.agent_id,
                     run.attempt],
                )
                ledger.execute(
                    "INSERT INTO public.ledger VALUES (%s, %s, %s, %s, %s)",
                    [run.job_name, run.fire_time, f"once:{key}", run.agent_id, run.attempt],
                )
                if spec.get("freeze"):
                    _freeze_if_asked(run)
        ledger.commit()


def _chaos_handler(spec: dict[str, Any]) -> Any:
    period = int(spec.get("period", 1))

    def handle(run: Run) -> None:
        _trace(run, "start")
        outcome = "error"
        try:
            _chaos_steps(run, spec, period)
            outcome = "ok"
        finally:
            _trace(run, "end", outcome=outcome)

    return handle


def _chaos_steps(run: Run, spec: dict[str, Any], period: int) -> None:
    with psycopg.connect(DSN, autocommit=True, connect_timeout=3,
                         prepare_threshold=None) as conn:
        conn.execute(
            "INSERT INTO public.starts (job, fire_time, agent, attempt) "
            "VALUES (%s, %s, %s, %s)",
            [run.job_name, run.fire_time, run.agent_id, run.attempt],
        )
        if spec.get("before"):
            _chaos_effect(conn, run, spec["before"])
        _work(run, float(spec.get("sleep", 0)))
        index = int(run.fire_time.timestamp()) // period
        every = int(spec.get("fail_every", 0))
        if every and index % every == 0 and run.attempt <= int(spec.get("fail_attempts", 0)):
            raise RuntimeError(f"planned failure of attempt {run.attempt}")
        if spec.get("once"):
            _chaos_once(conn, run, spec, spec["once"], float(spec.get("once_sleep", 0)))
        if spec.get("after"):
            _chaos_effect(conn, run, spec["after"])
    if spec.get("tail") and TRACE_DIR is not None:  # the harness may stop Postgres right now
        with contextlib.suppress(FileNotFoundError):
            os.rename(*(os.path.join(TRACE_DIR, f"outage-{n}") for n in ("wanted", "now")))
    _work(run, float(spec.get("tail", 0)))  # work after the last effect: no database needed


# -- light handlers: the wide soak's 1,000 jobs @every 1s ---------------------------------------

_light = threading.local()  # one connection per worker thread, kept across runs


def _light_handler(spec: dict[str, Any]) -> Any:
    """One cheap statement per run: the receipt and the ledger row (public.wide_ledger) commit
    together, on the worker thread's own connection (opened again after any error)."""

    def handle(run: Run) -> None:
        conn = getattr(_light, "conn", None)
        if conn is None or conn.closed:
            conn = _light.conn = psycopg.connect(DSN, autocommit=True, connect_timeout=3,
                                              prepare_threshold=None)
        try:
            with conn.transaction():
                if run.effect("tick", conn=conn):
                    conn.execute(
                        "INSERT INTO public.wide_ledger VALUES (%s, %s, %s, %s)",
                        [run.job_name, run.fire_time, run.agent_id, run.attempt],
                    )
        except BaseException:
            conn.close()
            _light.conn = None
            raise

    return handle


MAKERS = {"chaos": _chaos_handler, "light": _light_handler}
for _spec in json.loads(os.environ.get("APP_JOBS", "[]")):
    _settings = {k: v for k, v in _spec.items() if k not in HANDLER_KEYS}
    _make = MAKERS.get(_spec.get("kind", ""), _handler)
    agent.job(_spec["name"], _spec.get("schedule"), **_settings)(_make(_spec))
