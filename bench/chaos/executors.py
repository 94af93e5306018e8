"""The storm's own faults, run: a replica killed, stopped, paused or renamed; the standalone
server restarted or stopped; the Patroni leader killed or switched over; a replica's connections
black-holed; the pooler killed or paused; a manual run or a backfill of a Forbid job; a handler
frozen inside its once() block. (The recovery faults are recovery.py's, the rolling upgrade
upgrade.py's.)

The database's fault state lives here: one database fault at a time (`pg_lock`), whether one is
on (`pg_down`) and when the last one ended (`pg_fault_ended`), which the storm reads to tell a
replica that refused to start for want of a database from a crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Protocol

import psycopg

from claimsched.db import Store
from claimsched.errors import ClaimschedError
from claimsched.tools.postgres import TemporaryPostgres
from claimsched.tools.processes import python_path

from ..ha.patroni import PatroniCluster
from ..ha.pgbouncer import Pgbouncer
from .faults import Event, Fault
from .harness import REPO
from .kinds import FAILOVER, MANUAL_FAULTS, PARTITION, PG_FAULTS, POOLER
from .plan import TAIL_WAIT
from .recovery import Fleet


class Storm(Fleet, Protocol):
    """What the storm's own faults use of a running storm (storm.ChaosRun): what the recovery
    faults use, and the database, its pooler, the handlers' trace folder and the violations."""

    trace_dir: Path
    pg: TemporaryPostgres | None
    ha: PatroniCluster | None
    pooler: Pgbouncer | None

    def violation(self, text: str) -> None: ...


class FaultExecutors:
    """Runs the storm's own faults, each in the thread the storm started for it."""

    def __init__(self, fleet: Storm) -> None:
        self.fleet = fleet
        self.pg_lock = threading.Lock()
        self.pooler_lock = threading.Lock()  # one pooler fault or move at a time
        self.pg_down = False
        self.pg_fault_ended = -1e9
        self.freeze_lock = threading.Lock()  # one frozen handler at a time

    def run(self, fault: Fault, event: Event) -> None:
        if fault.kind in PG_FAULTS:
            self._pg_fault(fault, event)
        elif fault.kind == FAILOVER:
            self._failover(fault, event)
        elif fault.kind == PARTITION:
            self._partition(fault, event)
        elif fault.kind == POOLER:
            self._pooler_fault(fault, event)
        elif fault.kind in MANUAL_FAULTS:
            self._manual_fault(fault, event)
        elif fault.kind == "freeze_in_once":
            self._freeze_fault(fault, event)
        else:
            self._replica_fault(fault, event)

    def _pg_fault(self, fault: Fault, event: Event) -> None:
        assert self.fleet.pg is not None
        timed = fault.kind == "long_outage" and self._await_tail()
        with self.pg_lock:
            event.at = self.fleet.now()  # the outage's window (timeline.py) begins here
            self.pg_down = True
            try:
                if fault.kind == "pg_restart":
                    self.fleet.pg.restart("fast")
                else:
                    self.fleet.pg.stop("fast")
                    time.sleep(fault.duration)
                    self.fleet.pg.start()
            finally:
                self.pg_down = False
                self.pg_fault_ended = time.monotonic()
        event.detail = f"{fault.duration:.1f}s down" if fault.kind != "pg_restart" else ""
        event.detail += ", as a handler began its tail" if timed else ""

    def _failover(self, fault: Fault, event: Event) -> None:
        """The leader SIGKILLed (Patroni, postmaster, children) or switched over, while runs are
        in flight; the fault lasts until the cluster is whole again (a killed node restarted on
        its data dir, streaming as the synchronous standby) and a commit went through."""
        cluster = self.fleet.ha
        assert cluster is not None
        with self.pg_lock:
            cluster.wait_healthy(120)  # the previous failover's rejoin may still be streaming
            event.at = self.fleet.now()  # the outage's window (timeline.py) begins here
            began = time.monotonic()
            self.pg_down = True
            try:
                old = cluster.leader()
                if fault.value:
                    old = cluster.kill_leader()
                    new = cluster.standby()
                    cluster.wait_leader(new, timeout=90)
                    promoted = time.monotonic() - began
                    self._move_pooler(new)
                    cluster.rejoin(old)
                else:
                    new = cluster.switchover(timeout=90)
                    promoted = time.monotonic() - began
                    self._move_pooler(new)
                cluster.wait_healthy(120)
                deadline = time.monotonic() + 60
                while not self._commit_ok() and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                self.pg_down = False
                self.pg_fault_ended = time.monotonic()
        how = "SIGKILL" if fault.value else "switchover"
        event.detail = (
            f"{how} of {old}: {new} leads after {promoted:.1f}s, commits again after "
            f"{time.monotonic() - began:.1f}s"
        )

    def _move_pooler(self, leader: str) -> None:
        """Point the pooler at the new leader, as a Patroni on_role_change callback would."""
        if self.fleet.pooler is not None and self.fleet.ha is not None:
            with self.pooler_lock:
                self.fleet.pooler.point_at(self.fleet.ha.members[leader].dsn)

    def _commit_ok(self) -> bool:
        """A transaction with an xid commits: on a strict synchronous primary, only once a
        synchronous standby confirmed it."""
        try:
            self.fleet.query("SELECT txid_current()")
            return True
        except psycopg.Error:
            return False

    def _partition(self, fault: Fault, event: Event) -> None:
        """Every connection of one replica black-holed for longer than every lease: what it sent
        waits in the kernel, nothing errors, no call returns; then everything flows again."""
        with self.fleet.lanes.holding(fault.target) as slot:
            event.target = slot.agent_id
            try:
                for proxy in slot.proxies:
                    proxy.blackhole()
                time.sleep(fault.duration)
            finally:
                for proxy in slot.proxies:
                    proxy.restore()
        event.detail = f"cut off {fault.duration:.1f}s"

    def _pooler_fault(self, fault: Fault, event: Event) -> None:
        """The pooler killed and started again, or paused and resumed, after the fault's
        duration. A PAUSE answers once the transactions in flight ended (a replica stopped in
        one holds it): it is resumed at the planned end whether or not it answered."""
        pooler = self.fleet.pooler
        assert pooler is not None
        with self.pooler_lock:  # a failover moves it meanwhile
            if not fault.value:
                pooler.kill()
                time.sleep(fault.duration)
                pooler.start()
                event.detail = f"killed, started again after {fault.duration:.1f}s"
                return
            unanswered: list[str] = []

            def pause() -> None:  # RESUME may end the PAUSE's own admin connection first
                try:
                    pooler.pause()
                except psycopg.Error as exc:
                    unanswered.append(str(exc).splitlines()[0])

            pausing = threading.Thread(target=pause, daemon=True)
            pausing.start()
            time.sleep(fault.duration)
            pooler.resume()
            pausing.join(10)
            event.detail = f"paused {fault.duration:.1f}s" + "".join(
                f" (the PAUSE did not answer: {why})" for why in unanswered)

    def _await_tail(self) -> bool:
        """Ask for the moment a handler has made its last write and works on without the
        database (bench/chaos/app.py takes the file outage-wanted then): an outage that begins
        there lets the handler finish while Postgres is away. False if none came in time."""
        wanted, now = self.fleet.trace_dir / "outage-wanted", self.fleet.trace_dir / "outage-now"
        wanted.touch()
        deadline = time.monotonic() + TAIL_WAIT
        while time.monotonic() < deadline and not now.exists():
            time.sleep(0.02)
        try:
            wanted.unlink()
            return False
        except FileNotFoundError:  # taken
            now.unlink()
            return True

    def _manual_fault(self, fault: Fault, event: Event) -> None:
        """A manual run of a Forbid job (the store, as the operator's trigger annotation does), or
        a backfill of two or three of its occurrences (the CLI, as a person does)."""
        job = next(j for j in self.fleet.jobs if j["name"] == fault.target)
        try:
            if fault.kind == "trigger":
                store = Store(self.fleet.dsn)
                try:
                    queued = store.listings.request_runs(job["name"], [store.db_now()], "manual")
                finally:
                    store.close()
                event.detail = f"queued {len(queued)}"
                return
            (db_now,) = self.fleet.query("SELECT now()")[0]
        except (psycopg.Error, ClaimschedError) as exc:  # Postgres may be away: so be it
            event.detail = f"refused: {type(exc).__name__}: {str(exc)[:120]}"
            return
        period = timedelta(seconds=job["period"])
        if fault.value < 0:  # the last occurrences, most of them already ran or were skipped
            end = db_now - timedelta(seconds=1)
        else:  # occurrences from before the schedule began
            end = self.fleet.active_since[job["name"]] - fault.value * period
        start = end - 2 * period - timedelta(milliseconds=500)
        command = [sys.executable, "-m", "claimsched.cli", "backfill", "--json", job["name"],
                   start.isoformat(), end.isoformat()]
        env = {**os.environ, "CLAIMSCHED_DSN": self.fleet.dsn, "PYTHONPATH": python_path(REPO)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        if "Traceback" in done.stderr:
            self.fleet.violation(f"the backfill command crashed:\n{done.stderr[-1500:]}")
        event.detail = (
            done.stdout.strip() if done.returncode == 0
            else f"refused: {done.stderr.strip()[-200:]}"
        )

    def _freeze_fault(self, fault: Fault, event: Event) -> None:
        """Ask the next handler of the job that enters its once() block to freeze its replica
        there (bench/chaos/app.py), keep it frozen for the fault's duration, then resume it."""
        job = next(j for j in self.fleet.jobs if j["name"] == fault.target)
        flag = self.fleet.trace_dir / f"freeze-{job['name']}"
        with self.freeze_lock:
            flag.touch()
            deadline = time.monotonic() + 3 * job["period"] + 5
            taken = None
            while taken is None:
                taken = next(iter(self.fleet.trace_dir.glob(f"frozen-{job['name']}-*")), None)
                if taken is None and time.monotonic() > deadline:
                    try:
                        flag.unlink()
                        event.detail = "no run of it reached its once() block"
                        return
                    except FileNotFoundError:  # taken just now
                        deadline = time.monotonic() + 5
                time.sleep(0.02)
            pid = int(taken.name.rsplit("-", 1)[1])
            frozen = [
                (s.agent_id, s.replica)
                for s in self.fleet.slots.values()
                if s.replica is not None and s.replica.process.pid == pid
            ]
            time.sleep(fault.duration)
            for _, replica in frozen:  # unless a SIGKILL came first
                if replica.alive:
                    replica.signal(signal.SIGCONT)
            taken.unlink()
            event.target = frozen[0][0] if frozen else f"pid {pid}"
            event.detail = f"{job['name']} frozen inside once() for {fault.duration:.1f}s"

    def _replica_fault(self, fault: Fault, event: Event) -> None:
        with self.fleet.lanes.holding(fault.target) as slot:
            replica = slot.replica
            assert replica is not None
            event.target = slot.agent_id
            if fault.kind == "sigstop":
                replica.signal(signal.SIGSTOP)
                time.sleep(fault.duration)
                replica.signal(signal.SIGCONT)
                event.detail = f"paused {fault.duration:.1f}s"
                return
            graceful = fault.kind == "sigterm" or bool(fault.kind == "new_id" and fault.value)
            self.fleet.bring_down(slot, graceful, event)
            time.sleep(fault.duration)
            if fault.kind == "new_id":
                suffix = chr(ord("a") + len(slot.ids))
                slot.agent_id = f"{slot.name}{suffix}"
                slot.ids.append(slot.agent_id)
                slot.incarnation = 0
                event.detail += f", back as {slot.agent_id}"
            self.fleet.launch(slot)
