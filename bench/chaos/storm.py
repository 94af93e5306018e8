"""One storm, end to end (ChaosRun): R real agent processes, J jobs, the seed's faults, invariants.

One seed fixes everything the harness decides (plan.py): the jobs (period, policy, handler), the
fault schedule (when, what, which replica, how long) and the skewed replica's clock; the recovery
faults (recovery.py) pick their replica when they run, by what job_runs says then. What the
agents do in between is real concurrency, so a replay of a seed re-creates the same storm, not
the same interleaving. Every run ends the same way: heal every fault, wait until every job caught
up, disable the schedules, wait until nothing is left to do, stop the replicas gracefully, and
check the invariants (checker.py) against the claim table, the receipts, the app's ledger and the
audit trail (and, in timeline.py, those about time: Forbid runs never in progress at once, what
became of handlers that finished while Postgres was away, receipts never committed after a later
attempt began; in recovery_checks.py, those about superseded attempts and what the recovery
faults left behind). The report's figures and summary are report.py's; the command line is
cli.py's.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from claimsched.db import Store
from claimsched.schedule.specs import job_spec
from claimsched.tools.postgres import TemporaryPostgres

from ..ha.blackhole import Blackhole
from ..ha.patroni import PatroniCluster, patroni_cluster
from ..ha.pgbouncer import Pgbouncer
from ..releases import isolated_env, previous
from . import app_sql
from .checker import Checker, expected_fire_times
from .config import ChaosConfig
from .executors import FaultExecutors
from .faults import GRACE, Event, Fault, Lanes, Slot
from .harness import Replica, Replicas
from .jobs import SCHEDULE_KEYS, app_jobs
from .kinds import ALL_KINDS, DB_FAULTS, PARTITION, POOLER
from .maintenance import Maintenance
from .plan import plan
from .recovery import RECOVERY_FAULTS, RecoveryFaults
from .report import max_overlap, violation_kinds
from .timeline import TimeChecks, Timeline, Trace
from .upgrade import ROLLING_UPGRADE, roll

# How long after a database fault ended a replica that refuses to start for want of a database is
# a restart (the kubelet's), not a crash. A promoted primary takes every replica's reconnection
# and catch-up and its new standby's first sync at once: on a loaded machine a connection can
# time out for a while after the failover (seen: 12.5 s after a switchover, load average 30).
SETTLE_AFTER_DB_FAULT = {False: 10.0, True: 30.0}  # by cfg.ha


# -- replicas as a kubelet would run them ----------------------------------------------------------


class ChaosRun:
    """Runs one seed end to end and returns its report (violations included, never raised)."""

    def __init__(self, cfg: ChaosConfig, folder: Path, log: Any = None) -> None:
        self.cfg = cfg
        self.folder = folder
        self.say = log or (lambda text: None)
        self.jobs, self.skewed, self.initial_skew, self.faults, self.maintenance_waits = plan(cfg)
        self.slots_names = [f"r{i}" for i in range(cfg.replicas)]
        self.events: list[Event] = []
        self.violations: list[str] = []
        self.notes: Counter[str] = Counter()
        self.skew_lock = threading.Lock()  # skew faults write one file
        self.pg: TemporaryPostgres | None = None  # the database: one server,
        self.ha: PatroniCluster | None = None  # or with cfg.ha a Patroni cluster
        self.pooler: Pgbouncer | None = None  # with POOLER
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.mono_to_wall = time.time() - time.monotonic()  # the handlers trace monotonic time
        self.trace_dir = folder / "trace"
        self.recovery = RecoveryFaults(self)
        self.executors = FaultExecutors(self)
        self.maintenance = Maintenance(self, self.maintenance_waits)
        # the previous release's agents until a rolling upgrade; this release's schema from then
        self.release = previous() if ROLLING_UPGRADE in cfg.kinds else None
        self.migrated = threading.Event()
        self.history_from = 0  # upgrade.py: where the audit trail's attempts have a history
        self._lock = threading.Lock()
        # the tables the Python checks read: the wide soak (bench/chaos/wide.py) points them at
        # views of its heavy jobs only, and checks its light jobs in SQL
        self.scope = {
            "runs": "claimsched.job_runs",
            "effects": "claimsched.job_effects",
            "attempts": "claimsched.job_attempts",
        }
        self.extra_jobs: list[dict[str, Any]] = []  # jobs the Python checks do not read
        self.setup_sql = "SELECT 1"  # after app_sql's tables: the wide soak's views

    # -- helpers ---------------------------------------------------------------------------------

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)
        self.say(f"VIOLATION: {text}")

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        # commit times order receipts against the grants of later attempts (timeline.py)
        settings = {
            "max_connections": "400",
            "track_commit_timestamp": "on",
            **dict(self.cfg.pg_settings),
        }
        with self._database(settings):
            self._setup()
            self.group = Replicas(self.dsn, self.folder, app_jobs(self.jobs + self.extra_jobs),
                                  self._env())
            self.slots = {
                name: Slot(
                    name, name, self.folder / "skew" if name == self.skewed else None, ids=[name],
                    release=self.release,
                )
                for name in self.slots_names
            }
            self.lanes = Lanes(self.faults, self.slots)
            self._write_skew(self.initial_skew)
            try:
                if POOLER in self.cfg.kinds:
                    self._pool()
                if PARTITION in self.cfg.kinds:
                    for slot in self.slots.values():
                        self._proxy(slot)
                for slot in self.slots.values():
                    self.launch(slot)
                self._wait_ready()
                self.t0, self.wall0 = time.monotonic(), time.time()
                threads = [
                    threading.Thread(target=self._kubelet, name="chaos-kubelet", daemon=True),
                    threading.Thread(target=self.maintenance.run, name="chaos-maintain",
                                     daemon=True),
                ]
                for thread in threads:
                    thread.start()
                self._storm()
                self._heal()
                cutoff = self._catch_up()
                self.query("UPDATE claimsched.job_schedule SET enabled = false")
                self._quiesce()
                self.stop.set()
                for thread in threads:
                    thread.join(30)
                self.maintenance.once("final")
                self._shutdown()
                report = self._check(cutoff)
            finally:
                self.stop.set()
                self.group.stop_all()
                for slot in self.slots.values():
                    for proxy in slot.proxies:
                        proxy.close()
                if self.pooler is not None:
                    self.pooler.remove()
        report["elapsed_seconds"] = round(time.monotonic() - started, 1)
        return report

    @contextmanager
    def _database(self, settings: dict[str, str]) -> Iterator[None]:
        """One throwaway server, or with `ha` a Patroni cluster (etcd, two nodes, synchronous and
        strict) that the harness and the agents reach by a DSN naming both nodes."""
        if self.cfg.ha:
            with patroni_cluster(parameters=settings) as cluster:
                # 5 s: a promoted primary under every replica's reconnection is slow to answer
                self.ha, self.dsn = cluster, cluster.dsn(connect_timeout="5")
                yield
        else:
            with TemporaryPostgres(settings=settings) as pg:
                self.pg, self.dsn = pg, pg.dsn
                yield

    def _primary(self) -> str:
        """A direct DSN of the primary: the standalone server, or the Patroni leader."""
        if self.ha is None:
            return self.dsn
        leader = self.ha.leader()
        assert leader is not None, self.ha.logs()
        return self.ha.members[leader].dsn

    def _pool(self) -> None:
        """A pgbouncer in front of the primary; the odd slots' replicas reach the database
        through it (poll mode: nothing lasts beyond a transaction)."""
        self.pooler = Pgbouncer(self._primary(), pool_size=40, max_client_conn=2000)
        self.pooler.start()
        for index, slot in enumerate(self.slots.values()):
            if index % 2:
                slot.dsn = self.pooler.dsn_for(self.dsn)

    def _proxy(self, slot: Slot) -> None:
        """Put every connection of the slot's replicas behind black-hole proxies, one per node
        (in front of the pooler, for a pooled slot)."""
        ports = [int(p) for p in str(conninfo_to_dict(slot.dsn or self.dsn)["port"]).split(",")]
        slot.proxies = [Blackhole(port) for port in ports]
        slot.dsn = make_conninfo(slot.dsn or self.dsn,
                                 port=",".join(str(p.port) for p in slot.proxies))

    def _env(self) -> dict[str, str]:
        return {
            "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",
            "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": str(GRACE),
            "CLAIMSCHED_RETRY_BACKOFF_SECONDS": "0.3",
            "CLAIMSCHED_MAX_CONCURRENCY": str(self.cfg.max_concurrency),
            "CLAIMSCHED_LOG_LEVEL": "DEBUG",
            "APP_TRACE_DIR": str(self.trace_dir),
        }

    def _setup(self) -> None:
        self.trace_dir.mkdir(exist_ok=True)
        store = Store(self.dsn)
        try:
            if self.release is None:
                store.admin.migrate()
                self.migrated.set()
            else:
                subprocess.run(self.release.command("migrate", "--dsn", self.dsn), check=True,
                               capture_output=True, env=isolated_env())
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(app_sql.LEDGER)
                conn.execute(app_sql.AUDIT)
                conn.execute(self.setup_sql)
            if self.cfg.lapse_partitions:
                self.maintenance.lapse()
            for job in self.jobs + self.extra_jobs:
                fields = {k: job[k] for k in SCHEDULE_KEYS}
                store.schedules.upsert(job_spec(job_name=job["name"], source="cli", **fields))
        finally:
            store.close()  # its pool's threads would outlive the run until a garbage collection
        self.active_since = {
            name: since
            for name, since in self.query(
                "SELECT job_name, active_since FROM claimsched.job_schedule"
            )
        }

    def _write_skew(self, seconds: float) -> None:
        # libfaketime re-reads the file while the replica runs: replace it atomically, so it
        # never sees a half-written offset (it exits the process on one it cannot parse).
        # Two skew faults can fall within milliseconds, each in its own thread: one at a time.
        with self.skew_lock:
            partial = self.folder / "skew.tmp"
            partial.write_text(f"{int(seconds):+d}s\n")
            os.replace(partial, self.folder / "skew")

    def launch(self, slot: Slot) -> None:
        slot.incarnation += 1
        slot.replica = self.group.start(
            slot.agent_id,
            skew_file=slot.skew_file,
            log_name=f"{slot.agent_id}.{slot.incarnation}",
            release=slot.release,
            **({"CLAIMSCHED_DSN": slot.dsn} if slot.dsn else {}),
        )

    def started(self, slot: Slot) -> bool:
        return slot.replica is not None and "agent started" in slot.replica.output()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while not all(self.started(s) for s in self.slots.values()):
            for slot in self.slots.values():
                if slot.replica is not None and not slot.replica.alive:
                    raise RuntimeError(f"{slot.agent_id} did not start:\n{slot.replica.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError("replicas did not start within 60 s:\n" + self.group.dump())
            time.sleep(0.1)

    # -- faults ----------------------------------------------------------------------------------

    def _storm(self) -> None:
        """Start each fault at its time (each in its own thread, so they overlap); the next
        after a rolling upgrade only once the upgrade has ended."""
        running: list[threading.Thread] = []
        for fault in self.faults:
            if self.stop.wait(max(0.0, fault.at - (time.monotonic() - self.t0))):
                break
            thread = threading.Thread(
                target=self._fault, args=(fault,), name=f"chaos-{fault.kind}", daemon=True
            )
            thread.start()
            if fault.kind == ROLLING_UPGRADE:  # no other fault meets the previous release
                thread.join()
            running.append(thread)
            running = [t for t in running if t.is_alive()]
        self.stop.wait(max(0.0, self.cfg.duration - (time.monotonic() - self.t0)))
        for thread in running:
            thread.join(60)
            if thread.is_alive():
                self.violation(f"fault thread {thread.name} did not finish within 60 s")

    def _fault(self, fault: Fault) -> None:
        event = Event(self.now(), fault.kind, fault.target)
        try:
            if fault.kind in RECOVERY_FAULTS:
                self.recovery.run(fault, event)
            elif fault.kind == ROLLING_UPGRADE:
                roll(self, fault, event)
            elif fault.kind == "skew":
                self._write_skew(fault.value)
                event.detail = f"{int(fault.value):+d}s"
            else:
                self.executors.run(fault, event)
        except Exception as exc:  # a harness failure is reported, not hidden
            self.violation(f"harness: fault {fault} raised {exc!r}")
        event.end = self.now()
        with self._lock:
            self.events.append(event)

    # -- replicas brought down, and restarted as a kubelet would -----------------------

    def bring_down(self, slot: Slot, graceful: bool, event: Event) -> None:
        replica = slot.replica
        assert replica is not None
        if graceful:
            # SIGTERM is what a rolling update sends a started app; before the agent installed
            # its handler Python would just die, so wait (bounded) for the agent to be up.
            deadline = time.monotonic() + 15
            while replica.alive and not self.started(slot) and time.monotonic() < deadline:
                time.sleep(0.05)
        if not replica.alive:
            event.detail = "already down"
            self._classify_exit(slot, replica)
            return
        replica.signal(signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            code = replica.process.wait(GRACE + 15)
        except Exception:
            stacks = _stacks(replica)
            replica.signal(signal.SIGKILL)
            replica.process.wait(10)
            self.violation(
                f"{slot.agent_id} did not stop within {GRACE + 15}s of SIGTERM; its threads:\n"
                f"{stacks}"
            )
            return
        event.detail = f"{'SIGTERM' if graceful else 'SIGKILL'}, exit {code}"
        if graceful and code != 0:
            self.violation(
                f"{slot.agent_id} exited {code} on SIGTERM (expected 0):\n"
                f"{replica.output()[-1500:]}"
            )

    def _classify_exit(self, slot: Slot, replica: Replica) -> None:
        """A replica that exited on its own: refusing to start without a database is expected
        (the kubelet restarts it); anything else is a crash."""
        code = replica.process.poll()
        text = replica.output()
        if "libfaketime: In parse_ft_string()" in text:
            # the clock-skew tool itself aborted the process (exit(1), like a SIGKILL); not
            # something claimsched did, so it counts as one more crash fault
            self.notes["libfaketime_aborts"] += 1
            return
        settle = SETTLE_AFTER_DB_FAULT[self.cfg.ha]
        recent_pg = (self.executors.pg_down
                     or time.monotonic() - self.executors.pg_fault_ended < settle)
        if "agent started" not in text and "claimsched: error:" in text and recent_pg:
            self.notes["startup_refused_while_db_down"] += 1
            return
        self.violation(f"{slot.agent_id} exited {code} unexpectedly:\n{text[-2000:]}")

    def _kubelet(self) -> None:
        """Restart replicas that exited on their own (restartPolicy: Always, 1 s back-off)."""
        while not self.stop.wait(0.2):
            for slot in self.slots.values():
                if slot.held or slot.replica is None or slot.replica.alive:
                    continue
                if not slot.lock.acquire(blocking=False):
                    continue
                try:
                    if slot.held or slot.replica.alive:
                        continue
                    self._classify_exit(slot, slot.replica)
                    with self._lock:
                        self.events.append(
                            Event(
                                self.now(),
                                "exited",
                                slot.agent_id,
                                f"exit {slot.replica.process.poll()}",
                            )
                        )
                    time.sleep(1.0)
                    self.launch(slot)
                finally:
                    slot.lock.release()

    # -- the end: heal, catch up, quiesce, stop --------------------------------------------------

    def _heal(self) -> None:
        with self.executors.pg_lock:
            if self.ha is not None:
                self.ha.wait_healthy(120)
            elif not self.query_ok():
                assert self.pg is not None
                self.pg.start()
        if self.pooler is not None:
            with self.executors.pooler_lock:
                if not self.pooler.running:
                    self.pooler.start()
                self.pooler.point_at(self._primary())
        for slot in self.slots.values():
            with slot.lock:
                if slot.replica is not None and slot.replica.alive:
                    slot.replica.signal(signal.SIGCONT)
                elif slot.replica is not None:
                    self._classify_exit(slot, slot.replica)
                    self.launch(slot)
        deadline = time.monotonic() + 60
        while not all(self.started(s) for s in self.slots.values()):
            if time.monotonic() > deadline:
                self.violation("replicas did not all start again after the storm")
                break
            time.sleep(0.1)

    def query_ok(self) -> bool:
        try:
            self.query("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def _catch_up(self) -> dict[str, datetime]:
        """Wait until every expected occurrence up to each job's latest due one has a row; those
        latest ones are the cutoffs. A Forbid job may have recorded its latest occurrence as
        skipped (busy) while older ones of its backlog are still deferred: they have no row yet,
        and disabling the schedules then would abandon them."""
        deadline = time.monotonic() + self.cfg.settle_timeout
        while True:
            (db_now,) = self.query("SELECT now() - interval '1.5 seconds'")[0]
            cutoff = {j["name"]: _latest(db_now, j["period"]) for j in self.jobs}
            have = set(
                self.query(
                    f"SELECT job_name, fire_time FROM {self.scope['runs']} WHERE fire_time <= %s",  # noqa: S608
                    [max(cutoff.values())],
                )
            )
            late = sorted(
                job["name"]
                for job in self.jobs
                if any(
                    (job["name"], fire) not in have
                    for fire in expected_fire_times(
                        job["period"], self.active_since[job["name"]], cutoff[job["name"]]
                    )
                )
            )
            if not late:
                return cutoff
            if time.monotonic() > deadline:
                self.violation(f"jobs never caught up within {self.cfg.settle_timeout}s: {late}")
                return cutoff
            time.sleep(0.25)

    def _quiesce(self) -> None:
        """Wait until nothing is left to do, and it stays so for longer than a claim can take
        (a claim blocked behind other claims, e.g. by a deadlock, lands after it started)."""
        deadline = time.monotonic() + self.cfg.settle_timeout
        calm_since: float | None = None
        while time.monotonic() < deadline:
            (left,) = self.query(
                "SELECT (SELECT count(*) FROM claimsched.job_runs WHERE status IN "
                "('running', 'orphaned', 'pending') "
                "    OR (status = 'failed' AND retry_at IS NOT NULL))"
                " + (SELECT count(*) FROM pg_stat_activity WHERE state <> 'idle' "
                "    AND pid <> pg_backend_pid() AND query ILIKE '%%job_runs%%')"
            )[0]
            if left:
                calm_since = None
            elif calm_since is None:
                calm_since = time.monotonic()
            elif time.monotonic() - calm_since > 3.0:
                return
            time.sleep(0.25)

    def _shutdown(self) -> None:
        for slot in self.slots.values():
            replica = slot.replica
            if replica is None or not replica.alive:
                continue
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        for slot in self.slots.values():
            replica = slot.replica
            if replica is None:
                continue
            try:
                code = replica.process.wait(GRACE + 15)
            except Exception:
                self.violation(
                    f"{slot.agent_id} did not stop on SIGTERM at the end; its threads:\n"
                    f"{_stacks(replica)}"
                )
                continue
            if code != 0:
                self.violation(
                    f"{slot.agent_id} exited {code} at the end:\n{replica.output()[-1500:]}"
                )

    def _time_checks(
        self, runs: list[tuple[Any, ...]], starts: list[tuple[Any, ...]]
    ) -> TimeChecks:
        audit = self.query(
            "SELECT seq, op, at, pg_xact_commit_timestamp(xmin), old, new "
            "FROM public.run_audit ORDER BY seq"
        )
        receipts = self.query(
            "SELECT entity, job_name, fire_time, attempt, pg_xact_commit_timestamp(xmin) "  # noqa: S608
            f"FROM {self.scope['effects']}"
        )
        external = self.query(
            "SELECT job, fire_time, entity, idempotency_key, agent, attempt "
            "FROM public.external_calls"
        )
        outages = [
            (e.kind, self._wall(e.at), self._wall(e.end if e.end is not None else e.at))
            for e in self.events
            if e.kind in DB_FAULTS
        ]
        trace = Trace.read(self.trace_dir, self.mono_to_wall)
        checks = TimeChecks(self.jobs, Timeline(audit), trace)
        checks.run(runs, starts, receipts, external, outages)
        return checks

    def _wall(self, at: float) -> datetime:
        return datetime.fromtimestamp(self.t0 + at + self.mono_to_wall, UTC)

    def _dump(self) -> None:
        """Keep what the database held, next to the logs, to diagnose a violation."""
        tables = {
            "job_runs": "SELECT * FROM claimsched.job_runs ORDER BY job_name, fire_time",
            "job_effects": "SELECT * FROM claimsched.job_effects ORDER BY job_name, fire_time",
            "run_audit": "SELECT * FROM public.run_audit ORDER BY seq",
            "ledger": "SELECT * FROM public.ledger ORDER BY job, fire_time",
            "starts": "SELECT * FROM public.starts ORDER BY at",
            "external_calls": "SELECT * FROM public.external_calls ORDER BY at",
            "agents": "SELECT * FROM claimsched.agents",
        }
        for name, statement in tables.items():
            rows = _jsonable(self.query(statement))
            (self.folder / f"{name}.json").write_text(json.dumps(rows, default=str))

    # -- the invariants --------------------------------------------------------------------------

    def _check(self, cutoff: dict[str, datetime]) -> dict[str, Any]:
        schedules = {
            row[0]: row
            for row in self.query(
                "SELECT job_name, max_attempts, retry_on_failure FROM claimsched.job_schedule"
            )
        }
        runs = self.query(
            "SELECT id, job_name, fire_time, status, attempt, claimed_by, lease_until, "  # noqa: S608
            "finished_at, error, retry_at, orphan_count, lease_until < now() "
            f"FROM {self.scope['runs']}"
        )
        receipts = self.query(
            f"SELECT entity, job_name, fire_time, run_id, attempt FROM {self.scope['effects']}"  # noqa: S608
        )
        ledger = self.query("SELECT job, fire_time, entity, agent, attempt FROM public.ledger")
        starts = self.query("SELECT job, fire_time, agent, attempt, at FROM public.starts")
        audit = self.query("SELECT seq, op, tx, actor, old, new FROM public.run_audit ORDER BY seq")
        attempts = self.query(
            "SELECT job_name, fire_time, attempt, run_id, claimed_by, outcome, error "  # noqa: S608
            f"FROM {self.scope['attempts']}"
        )
        checker = Checker(self.jobs, self.active_since, cutoff, schedules, self.recovery.log,
                          self.history_from)
        found = checker.check(runs, receipts, ledger, starts, audit, attempts)
        for outcome, n in self.query(
            f"SELECT outcome, count(*) FROM {self.scope['attempts']} GROUP BY outcome"  # noqa: S608
        ):
            checker.stats[f"superseded_{outcome}"] = n
        timed = self._time_checks(runs, starts)
        found += timed.found
        final = self.maintenance.finished_rows()
        for rid, row in self.maintenance.finished_seen.items():
            if final.get(rid) != row:
                found.append(f"finished run {row} is {final.get(rid)} at the end")
        self.violations.extend(found)
        if self.violations or os.environ.get("CHAOS_DUMP"):
            self._dump()
        logs = "\n".join(p.read_text(errors="replace") for p in self.folder.glob("*.log"))
        executed = Counter(e.kind for e in self.events if e.kind in ALL_KINDS and e.happened)
        missed = Counter(e.kind for e in self.events if not e.happened)
        (deadlocks,) = self.query(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )[0]
        (expired_at_grant,) = self.query(
            "SELECT count(*) FROM public.run_audit WHERE new->>'status' = 'running' "
            "AND (op = 'INSERT' OR old->>'attempt' <> new->>'attempt') "
            "AND (new->>'lease_until')::timestamptz <= at AND actor IS NULL"
        )[0]
        first_start: dict[tuple[str, datetime], datetime] = {}
        # manual and backfilled runs: their fire time is not when they were due
        asked = set(
            self.query(
                f"SELECT job_name, fire_time FROM {self.scope['runs']} WHERE kind <> 'scheduled'"  # noqa: S608
            )
        )
        for job, fire, _agent, _attempt, at in starts:
            if (job, fire) not in asked:
                first_start[(job, fire)] = min(at, first_start.get((job, fire), at))
        latencies = sorted(
            (round(fire.timestamp() - self.wall0, 3), round((at - fire).total_seconds(), 3))
            for (_job, fire), at in first_start.items()
        )
        return {
            "seed": self.cfg.seed,
            "replicas": self.cfg.replicas,
            "jobs": self.cfg.jobs,
            "fault_seconds": self.cfg.duration,
            "lapse_partitions": self.cfg.lapse_partitions,
            "ha": self.cfg.ha,
            "kinds": list(self.cfg.kinds),
            "skewed_replica": self.skewed,
            "initial_skew_seconds": self.initial_skew,
            "faults_planned": [asdict(f) for f in self.faults],
            "faults_executed": [asdict(e) for e in sorted(self.events, key=lambda e: e.at)],
            "database": "patroni: 2 nodes, synchronous_mode_strict" if self.cfg.ha
            else "one server",
            "fault_counts": {k: executed.get(k, 0) for k in ALL_KINDS if k in self.cfg.kinds},
            # faults that found nothing to act on in time (no reclaimed or backfilled run)
            "faults_missed": dict(missed),
            "max_concurrent_faults": max_overlap(self.events),
            "occurrences_checked": checker.stats["expected"],
            **{k: v for k, v in checker.stats.items() if k != "expected"},
            **dict(sorted(timed.stats.items())),
            "completions_refused": logs.count("completion refused"),
            "leases_lost": logs.count("lease lost:"),
            "maintenance": dict(self.maintenance.counts),
            # findings, not invariants: claims that deadlocked on each other (Postgres counts
            # them; each costs a second), and leases that had already expired when granted
            "deadlocks": deadlocks,
            "leases_granted_already_expired": expired_at_grant,
            "notes": dict(self.notes),
            "violations": self.violations,
            "violation_kinds": violation_kinds(self.violations),
            "logs": str(self.folder),
            "storm_began_at": self.wall0,  # epoch seconds: second 0 of every "at"
            # seconds since the storm began: (fire time, fire-to-first-start latency)
            "fire_to_start": latencies,
        }


def _stacks(replica: Replica) -> str:
    """Every thread's stack of a live replica (bench/chaos/app.py dumps them on SIGUSR1)."""
    before = len(replica.output())
    replica.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and "most recent call first" not in replica.output()[before:]:
        time.sleep(0.1)
    time.sleep(0.3)
    return replica.output()[before:][-6000:]


def _jsonable(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [[v.isoformat() if isinstance(v, datetime) else v for v in row] for row in rows]


def _latest(moment: datetime, period: int) -> datetime:
    seconds = math.floor(moment.timestamp() / period) * period
    return datetime.fromtimestamp(seconds, UTC)


def run_seed(cfg: ChaosConfig, folder: Path | None = None, verbose: bool = False) -> dict[str, Any]:
    folder = folder or Path(tempfile.mkdtemp(prefix=f"claimsched-chaos-{cfg.seed}-"))
    folder.mkdir(parents=True, exist_ok=True)
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else None
    report = ChaosRun(cfg, folder, say).run()
    (folder / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report
