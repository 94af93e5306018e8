"""`claimsched demo`: real replicas race for every occurrence; one is killed, one paused; a verdict.

A throwaway PostgreSQL (or, with a DSN, the demo's own schema there), N agent processes running
`claimsched.demo_app`, a SIGKILL to the replica in the middle of a slow run, a SIGSTOP to another
past its lease and a SIGCONT once its run was reclaimed, a graceful SIGTERM to all at the end, and
a verdict from the database: every occurrence ran, no side effect twice, the late work refused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from psycopg import sql
from rich.console import Console
from rich.live import Live

from . import demo_app as app
from . import demo_view as view
from .db import Store, checked_schema, redact_dsn
from .demo_app import Fleet
from .demo_view import Effects, Frame, Key, LogTail, Observations
from .embedded import TemporaryPostgres
from .errors import ConfigurationError
from .schedules import Schedule

DEMO_SCHEMA = "claimsched_demo"
POLL_SECONDS = 0.25
STOP_GRACE = 10.0  # SIGTERM, then this long to finish (the agents' own grace is 5 s)
MARGIN = timedelta(seconds=1.5)  # occurrences this close to the stop may rightly be unclaimed
OVERTIME = 45.0  # how much longer than --duration the kill and pause may take


@dataclass
class Scenario:
    """The faults: SIGKILL a replica mid-run, then SIGSTOP another past its lease, SIGCONT it."""

    fleet: Fleet
    say: Callable[[str], None]
    killed: tuple[str, Key] | None = None
    paused: tuple[str, Key] | None = None
    restarted: str | None = None
    paused_at: float = 0.0
    resumed: bool = False
    reclaimed: dict[Key, tuple[str, int]] = field(default_factory=dict)
    refused: bool = False
    refused_before: int = 0  # the paused replica's refusals before it was paused

    @property
    def complete(self) -> bool:
        return bool(self.killed and self.killed[1] in self.reclaimed and self.resumed
                    and self.refused)

    @property
    def phase(self) -> str:
        if self.killed is None:
            return f"waiting for a replica to be mid-way through {app.SETTLE}, to kill it"
        if self.paused is None:
            return f"{self.killed[0]} killed; waiting for a run of {app.SETTLE} to pause"
        if not self.resumed:
            return f"{self.paused[0]} paused; waiting for its lease to expire and a takeover"
        if not self.complete:
            return f"{self.paused[0]} resumed; waiting for its late work to be refused"
        return "the kill and the pause are done: running on to the end"

    def tick(self, runs: list[dict[str, Any]], effects: Effects, seen: Observations) -> None:
        rows = {(r["job_name"], r["fire_time"]): r for r in runs}
        for fault in [f for f in (self.killed, self.paused) if f]:
            row = rows.get(fault[1])
            if row and row["attempt"] > 1 and fault[1] not in self.reclaimed:
                self.reclaimed[fault[1]] = (row["claimed_by"], row["attempt"])
        busy = {r["claimed_by"] for r in runs if r["status"] == "running" and r["attempt"] > 1}
        slow = [r for r in runs if r["job_name"] == app.SETTLE and r["status"] == "running"
                and r["attempt"] == 1 and self.fleet.up(r["claimed_by"])]
        for run in slow:
            key: Key = (app.SETTLE, run["fire_time"])
            done = {e for e, who, _ in effects.get(key, []) if who == run["claimed_by"]}
            if self.killed is None and done == {app.BATCHES[0]}:
                return self._kill(run["claimed_by"], key)
            if (self.killed and self.paused is None and key != self.killed[1] and len(done) < 2
                    and run["claimed_by"] not in busy):  # not the one finishing the orphan
                return self._pause(run["claimed_by"], key)
        if self.paused and not self.resumed and (
            self.paused[1] in self.reclaimed or time.monotonic() - self.paused_at > 30
        ):
            name = self.paused[0]
            self.fleet.replicas[name].signal(signal.SIGCONT)
            self.fleet.replicas[name].state = "running"
            self.resumed = True
            owner = self.reclaimed.get(self.paused[1], ("nobody", 0))
            self.say(f"resumed {name} (SIGCONT) after {time.monotonic() - self.paused_at:.1f}s; "
                     f"{owner[0]} owns its run now (attempt {owner[1]})")
        if self.paused:
            late = sum(v.count(self.paused[0]) for v in (*seen.fenced.values(),
                                                         *seen.refused_effects.values()))
            self.refused = self.resumed and late > self.refused_before
            self.refused_before = late if not self.resumed else self.refused_before

    def _kill(self, name: str, key: Key) -> None:
        replica = self.fleet.replicas[name]
        replica.signal(signal.SIGKILL)
        replica.state = "killed"
        self.killed = (name, key)
        self.say(f"killed {name} (SIGKILL, pid {replica.process.pid}) in the middle of "
                 f"{key[0]} @ {view.hms(key[1])}: after {app.BATCHES[0]}, before {app.BATCHES[1]}")
        self.restarted = f"r{len(self.fleet.replicas) + 1}"
        started = self.fleet.start(self.restarted)
        self.say(f"started {self.restarted} (pid {started.process.pid}) in its place, "
                 f"as an orchestrator would")

    def _pause(self, name: str, key: Key) -> None:
        self.fleet.replicas[name].signal(signal.SIGSTOP)
        self.fleet.replicas[name].state = "paused"
        self.paused, self.paused_at = (name, key), time.monotonic()
        self.say(f"paused {name} (SIGSTOP) while it runs {key[0]} @ {view.hms(key[1])}; "
                 f"its lease ({app.LEASE_SECONDS}s) will run out")


def _schema(args: argparse.Namespace) -> str:
    default = os.environ.get("CLAIMSCHED_SCHEMA", "claimsched")
    schema = str(args.schema) if args.schema != default else DEMO_SCHEMA
    return checked_schema(schema)


def verdict(
    runs: list[dict[str, Any]], effects: Effects, windows: dict[str, tuple[Schedule, datetime]],
    end: datetime, seen: Observations, scenario_complete: bool,
) -> dict[str, Any]:
    """The summary: occurrences expected vs seen, duplicates, orphans, refusals, and checks."""
    rows = [r for r in runs if r["kind"] == "scheduled" and r["job_name"] in windows]
    by_job: dict[str, dict[str, Any]] = {}
    for job, (schedule, since) in windows.items():
        expected = schedule.between(since, end)
        present = {r["fire_time"] for r in rows if r["job_name"] == job}
        missing = [t for t in expected if t not in present]
        by_job[job] = {"expected": len(expected), "seen": len(expected) - len(missing),
                       "missed": [t.isoformat() for t in missing],
                       "after_window": len(present - set(expected))}
    copies = Counter((key, entity) for key, done in effects.items() for entity, _, _ in done)
    duplicates = sum(n - 1 for n in copies.values())
    incomplete = [r for r in rows if r["status"] == "done" and set(app.EFFECTS[r["job_name"]])
                  - {e for e, _, _ in effects.get((r["job_name"], r["fire_time"]), [])}]
    expected_total = sum(j["expected"] for j in by_job.values())
    missed_total = sum(len(j["missed"]) for j in by_job.values())
    orphans = sum(1 for r in rows if r["attempt"] > 1 and r["orphan_count"] > 0)
    checks = {
        "no_missed_occurrences": missed_total == 0 and expected_total > 0,
        "no_duplicate_effects": duplicates == 0,
        "finished_runs_have_all_effects": not incomplete,
        "orphan_reclaimed": orphans >= 1,
        "fenced_completion_refused": seen.fenced_completions >= 1,
        "scenario_complete": scenario_complete,
    }
    return {
        "held": all(checks.values()),
        "checks": checks,
        "reasons": [name.replace("_", " ") + ": no" for name, ok in checks.items() if not ok],
        "window": {"start": min(s for _, s in windows.values()).isoformat(),
                   "end": end.isoformat()},
        "occurrences": {"expected": expected_total, "seen": expected_total - missed_total,
                        "missed": missed_total, "by_job": by_job},
        "runs": {"rows": len(rows), "attempts": sum(r["attempt"] for r in rows),
                 "by_status": dict(Counter(r["status"] for r in rows))},
        "effects": {"recorded": sum(copies.values()), "duplicates": duplicates,
                    "incomplete_runs": len(incomplete)},
        "orphans_reclaimed": orphans,
        "fenced": {"completions_refused": seen.fenced_completions,
                   "effects_refused": seen.refused_effect_count},
    }


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
        summary["wall_seconds"] = round(time.monotonic() - self.t0, 1)
        if self.keep_logs:
            summary["logs"] = str(self.folder)
        if self.args.json:
            print(json.dumps(summary, default=str))
        else:
            self.out.print(view.render_verdict(summary))
            self.out.print(f"wall time {summary['wall_seconds']}s"
                           + (f"; replica logs kept in {self.folder}" if self.keep_logs else ""),
                           highlight=False)
        return 0 if summary["held"] else 1

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

    def _prepare(self, store: Store) -> dict[str, tuple[Schedule, datetime]]:
        """A fresh demo schema (an older demo's is dropped; anything else is left alone)."""
        name = sql.Identifier(self.schema)
        with store.connection() as conn:
            row = conn.execute(app.SCHEMA_COMMENT, [self.schema]).fetchone()
            if row is not None and row[0] != app.SCHEMA_MARKER:
                raise ConfigurationError(
                    f"schema {self.schema!r} exists and was not made by the demo; it was left "
                    "alone: pick another with --schema"
                )
            if row is not None:
                conn.execute(sql.SQL(app.DROP_SCHEMA).format(name))
        store.migrate()
        with store.connection() as conn:
            conn.execute(sql.SQL(app.MARK_SCHEMA).format(name, sql.Literal(app.SCHEMA_MARKER)))
            conn.execute(app.LEDGER_DDL)
        for spec in app.specs():
            store.upsert_schedule(spec)
        records = {r.job_name: r for r in store.load_schedules()}
        return {job: (records[job].parsed, records[job].active_since) for job in app.SCHEDULES}

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
        runs = [r for r in store.list_runs(limit=300) if r["job_name"] in app.SCHEDULES]
        with store.connection() as conn:
            effects = view.effects_by_key(conn.execute(app.LEDGER_ROWS).fetchall())
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
        windows = self._prepare(store)
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
        runs = store.list_runs(limit=100_000)
        with store.connection() as conn:
            effects = view.effects_by_key(conn.execute(app.LEDGER_ROWS).fetchall())
        summary = verdict(runs, effects, windows, stop_at - MARGIN, self.seen, scenario.complete)
        self.keep_logs = not summary["held"]
        unfinished = sum(1 for r in runs if r["status"] in {"running", "orphaned", "pending"})
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


def run_demo(args: argparse.Namespace) -> int:
    if args.replicas < 2:
        raise ConfigurationError("the demo needs at least 2 replicas: one is killed, one paused")
    if args.duration <= 0:
        raise ConfigurationError("--duration must be more than 0 seconds")
    return Demo(args).run()
