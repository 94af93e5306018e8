"""`claimsched demo`: real replicas race for every occurrence; one is killed, one paused; a verdict.

A throwaway PostgreSQL (or, with a DSN, the demo's own schema there), N agent processes running
`claimsched.tools.demo.app`, a SIGKILL to the replica in the middle of a slow run, a SIGSTOP to
another past its lease and a SIGCONT once its run was reclaimed, a graceful SIGTERM to all at the
end, and a verdict from the database: every occurrence ran, no side effect twice, the late work
refused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.live import Live

from ...db import Store, checked_schema, compose, redact_dsn
from ...errors import ConfigurationError
from ...schedule.schedules import Schedule
from ..postgres import TemporaryPostgres
from . import app, view
from .fleet import Fleet
from .observations import Key, LogTail, Observations, effects_by_key
from .scenario import Scenario
from .verdict import verdict
from .view import Frame

DEMO_SCHEMA = "claimsched_demo"
POLL_SECONDS = 0.25
STOP_GRACE = 10.0  # SIGTERM, then this long to finish (the agents' own grace is 5 s)
MARGIN = timedelta(seconds=1.5)  # occurrences this close to the stop may rightly be unclaimed
OVERTIME = 45.0  # how much longer than --duration the kill and pause may take


def _schema(args: argparse.Namespace) -> str:
    default = os.environ.get("CLAIMSCHED_SCHEMA", "claimsched")
    schema = str(args.schema) if args.schema != default else DEMO_SCHEMA
    return checked_schema(schema)


def prepare(store: Store, schema: str) -> dict[str, tuple[Schedule, datetime]]:
    """A fresh demo schema (an older demo's is dropped; anything else is left alone), with the
    demo's schedules; returns each job's schedule and the time it became active."""
    with store.connection() as conn:
        row = conn.execute(app.SCHEMA_COMMENT, [schema]).fetchone()
        if row is not None and row[0] != app.SCHEMA_MARKER:
            raise ConfigurationError(
                f"schema {schema!r} exists and was not made by the demo; it was left "
                "alone: pick another with --schema"
            )
        if row is not None:
            conn.execute(compose(app.DROP_SCHEMA, schema))
    store.admin.migrate()
    with store.connection() as conn:
        conn.execute(compose(app.MARK_SCHEMA, schema, marker=app.SCHEMA_MARKER))
        conn.execute(app.LEDGER_DDL)
    for spec in app.specs():
        store.schedules.upsert(spec)
    records = {r.job_name: r for r in store.schedules.load()}
    return {job: (records[job].parsed, records[job].active_since) for job in app.SCHEDULES}


def _fault(fault: tuple[str, Key] | None) -> dict[str, Any] | None:
    return {"replica": fault[0], "job": fault[1][0], "fire_time": fault[1][1].isoformat()} \
        if fault else None


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Cleanup must finish: ignore Ctrl-C and SIGTERM while it runs."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.schema = args, _schema(args)
        self.out, self.err = Console(), Console(stderr=True, soft_wrap=True)
        self.live_view = self.out.is_terminal and not args.json
        self.t0 = self.started = time.monotonic()
        self.events: list[tuple[float, str]] = []
        self.seen = Observations()
        self.tails: dict[str, LogTail] = {}
        self.pg: TemporaryPostgres | None = None
        self.store: Store | None = None
        self.fleet: Fleet | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="claimsched-demo-"))
        self.keep_logs = True

    def say(self, text: str) -> None:
        self.events.append((time.monotonic() - self.t0, text))
        if not self.live_view:
            console = self.err if self.args.json else self.out
            console.print(f"{self.events[-1][0]:6.1f}s  {text}", markup=False, highlight=False,
                          soft_wrap=True)

    def run(self) -> int:
        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            summary = self._run()
            self._report(summary)
            if self.args.keep is not None and self.pg is not None:
                self._keep(self.pg.dsn, float(self.args.keep))
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, SIGTERM: no litter
            self.keep_logs = False
            raise
        except BaseException:
            self.keep_logs = bool(self.fleet and self.fleet.replicas)
            if self.keep_logs:
                self.err.print(f"replica logs kept in {self.folder}", markup=False,
                               highlight=False)
            raise
        finally:
            with _shielded():
                self._cleanup()
            signal.signal(signal.SIGTERM, previous)
        return 0 if summary["held"] else 1

    def _report(self, summary: dict[str, Any]) -> None:
        summary["wall_seconds"] = round(time.monotonic() - self.t0, 1)
        if self.keep_logs:
            summary["logs"] = str(self.folder)
        if self.args.keep is not None and self.pg is not None:
            summary["database"]["kept"] = True
        if self.args.json:
            print(json.dumps(summary, default=str), flush=True)
        else:
            self.out.print(view.render_verdict(summary))
            self.out.print(f"wall time {summary['wall_seconds']}s"
                           + (f"; replica logs kept in {self.folder}" if self.keep_logs else ""),
                           highlight=False)

    def _keep(self, dsn: str, seconds: float) -> None:
        """--keep: the embedded database stays up for `claimsched web` until Ctrl-C, SIGTERM
        or `seconds` (0: no end); then the cleanup removes it as usual."""
        until = f"for {seconds:g}s" if seconds else "until Ctrl-C"
        console = self.err if self.args.json else self.out
        console.print(
            f"the demo's database stays up {until}: {dsn}\n"
            f"watch it in a browser: {web_command()} --dsn '{dsn}' --schema {self.schema}",
            markup=False, highlight=False, soft_wrap=True,
        )
        deadline = time.monotonic() + seconds if seconds else None
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            while deadline is None or time.monotonic() < deadline:
                time.sleep(1.0 if deadline is None else
                           max(0.0, min(1.0, deadline - time.monotonic())))

    def _database(self) -> str:
        dsn = self.args.dsn or os.environ.get("CLAIMSCHED_DSN")
        if dsn:
            return str(dsn)
        status = self.err.status("starting a throwaway PostgreSQL") \
            if self.err.is_terminal and not self.args.json else contextlib.nullcontext()
        with status:
            self.pg = TemporaryPostgres()
            self.pg.start()
        self.say(f"started a throwaway PostgreSQL on 127.0.0.1:{self.pg.port} "
                 f"(pid {self._postgres_pid()})")
        return self.pg.dsn

    def _postgres_pid(self) -> int | None:
        if self.pg is None:
            return None
        try:
            return int((self.pg.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _poll(self, store: Store, scenario: Scenario) -> Frame:
        assert self.fleet is not None
        for replica in self.fleet.replicas.values():
            tail = self.tails.setdefault(replica.name, LogTail(replica.name, replica.log))
            for line in tail.read():
                text = self.seen.learn(line)
                if text:
                    self.say(text)
            code = replica.process.poll()
            if code is not None and replica.state in {"running", "paused"}:
                replica.state = "exited"
                self.say(f"{replica.name} exited on its own (code {code})")
        runs = [r for r in store.listings.runs(limit=300) if r.job_name in app.SCHEDULES]
        with store.connection() as conn:
            effects = effects_by_key(conn.execute(app.LEDGER_ROWS).fetchall())
        scenario.tick(runs, effects, self.seen)
        where = f"embedded PostgreSQL :{self.pg.port}" if self.pg else redact_dsn(store.dsn)
        return Frame(
            title=f"claimsched demo: {self.args.replicas} replicas, {where}, schema {self.schema}",
            elapsed=time.monotonic() - self.t0,
            duration=self.started - self.t0 + self.args.duration,
            phase=scenario.phase,
            replicas=[(r.name, r.process.pid, r.state) for r in self.fleet.replicas.values()],
            runs=runs, effects=effects, seen=self.seen, events=self.events,
            notes=view.fault_notes(scenario.killed, scenario.paused, scenario.reclaimed),
            db_now=store.db_now(),
        )

    def _run(self) -> dict[str, Any]:
        dsn = self._database()
        store = self.store = Store(dsn, schema=self.schema, max_size=3, name="claimsched-demo")
        store.open(timeout=float(self.args.connect_timeout))
        windows = prepare(store, self.schema)
        fleet = self.fleet = Fleet(dsn, self.schema, self.folder)
        for index in range(self.args.replicas):
            fleet.start(f"r{index + 1}")
        self.started = time.monotonic()
        self.say("started " + ", ".join(f"{r.name} (pid {r.process.pid})"
                                       for r in fleet.replicas.values())
                 + f": every one races for every occurrence of {', '.join(app.SCHEDULES)}")
        scenario = Scenario(fleet, self.say)
        height = self.out.height
        live = Live(console=self.out, auto_refresh=False, transient=False) \
            if self.live_view else contextlib.nullcontext()
        with live:
            while True:
                frame = self._poll(store, scenario)
                if isinstance(live, Live):
                    live.update(view.render(frame, height), refresh=True)
                elapsed = time.monotonic() - self.started
                if elapsed >= self.args.duration and (
                    scenario.complete or elapsed >= self.args.duration + OVERTIME
                ):
                    break
                time.sleep(POLL_SECONDS)
            stop_at = store.db_now()
            self.say("stopping: SIGTERM to every replica; they finish or hand back their runs")
            fleet.stop(STOP_GRACE)
            frame = self._poll(store, scenario)
            frame.phase = "stopped"
            if isinstance(live, Live):
                live.update(view.render(frame, height, all_events=True), refresh=True)
        runs = store.listings.runs(limit=100_000)
        with store.connection() as conn:
            effects = effects_by_key(conn.execute(app.LEDGER_ROWS).fetchall())
        summary = verdict(runs, effects, windows, stop_at - MARGIN, self.seen, scenario.complete)
        self.keep_logs = not summary["held"]
        unfinished = sum(1 for r in runs if r.status in {"running", "orphaned", "pending"})
        summary.update(
            replicas=self.args.replicas, duration_seconds=float(self.args.duration),
            database={"embedded": self.pg is not None, "dsn": redact_dsn(dsn),
                      "schema": self.schema, "data_dir": str(self.pg.root) if self.pg else None},
            faults={"killed": _fault(scenario.killed), "paused": _fault(scenario.paused),
                    "restarted": scenario.restarted},
            unfinished_runs=unfinished,
            processes={"postgres": self._postgres_pid(),
                       "replicas": {r.name: r.process.pid for r in fleet.replicas.values()}},
            events=[{"t": round(t, 1), "text": text} for t, text in self.events],
        )
        return summary

    def _cleanup(self) -> None:
        if self.fleet is not None:
            self.fleet.stop(grace=3.0)
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.close()
        if self.pg is not None:
            self.pg.destroy()
        if not self.keep_logs:
            shutil.rmtree(self.folder, ignore_errors=True)


def web_command() -> str:
    """`claimsched web` as this shell can run it: the console script beside this interpreter
    (a virtualenv's, which need not be on PATH), else the module through this interpreter."""
    script = Path(sys.executable).with_name("claimsched")
    if script.exists():
        return f"{shlex.quote(str(script))} web"
    return f"{shlex.quote(sys.executable)} -m claimsched.cli web"


def run_demo(args: argparse.Namespace) -> int:
    if args.replicas < 2:
        raise ConfigurationError("the demo needs at least 2 replicas: one is killed, one paused")
    if args.duration <= 0:
        raise ConfigurationError("--duration must be more than 0 seconds")
    if args.keep is not None and args.keep < 0:
        raise ConfigurationError("--keep takes the seconds to keep the database up (0: until "
                                 "Ctrl-C), not a negative number")
    if args.keep is not None and (args.dsn or os.environ.get("CLAIMSCHED_DSN")):
        raise ConfigurationError(
            f"--keep keeps the embedded database up; with a DSN the demo's schema stays in your "
            f"database anyway: claimsched web --schema {_schema(args)} shows it")
    return Demo(args).run()
