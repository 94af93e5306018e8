"""The claim loop: reads schedules, reclaims runs that want an owner, claims due occurrences.

It wakes when told to (a NOTIFY, a freed slot it waits for, a retry falling due, a recovered
database, the end of a reclaimed run that may have left work behind) or when the next occurrence
is due, asks the planner what to claim, lets the database decide, and hands each lease it won to
the workers.

Runs that want an owner (requests, orphans, due retries) drain at claim speed: each reclaim
takes as many as slots are free, and while a reclaim may have left work behind (it took as many
as it asked for, or a Forbid job's backlog waits for the run it started) the end of each run it
started looks again. A reclaim that takes nothing ends the looking until news comes (a NOTIFY,
housekeeping's `claimable`, a retry falling due). Scheduled fires never look: they cost no
statement more.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime

from .. import metrics
from ..clock import DbClock
from ..db import Store
from ..errors import DatabaseError
from ..health import DatabaseHealth, retry_conflicts
from ..logs import AgentLog
from ..plan.handlers import Handlers
from ..plan.planner import SETTLED, Entry, Planner, Sharing, micros
from ..records import Candidate, ClaimResult, Lease, describe_owner, released
from ..schedule.specs import JobSpec
from .housekeeping import Housekeeper
from .signals import Signals
from .supervisor import Supervisor
from .workers import Handler, Workers

RETRY_WAIT = 0.5  # seconds before retrying an occurrence that was deferred (Forbid, busy)
NOT_DUE_WAIT = 0.01  # seconds before asking again when the database said "not due yet"
# Seconds before proposing again an occurrence that another replica's claim, in flight, was
# inserting: by then it has committed (taken) or rolled back (ours to win), in all likelihood.
CONTENDED_WAIT = 0.1
FULL_WAIT = 5.0  # seconds to sleep with every slot busy; a freed slot wakes the loop earlier
LOST = frozenset({"taken", "contended"})  # races another replica won or is winning
# A run of the job is in progress or being inserted, maybe another replica's.
HELD = LOST | {"busy", "deferred"}
MORE = "more"  # not an outcome: the planner held back candidates and this claim settled some


@dataclass
class Claimer:
    """Claims this agent's share of due occurrences and starts their handlers.

    `handlers` and `declared` are the agent's registrations (read, never changed here); the
    `housekeeper` says whether the agent's presence row holds the job list (reclaims then
    leave it to the database to read, rather than send 100,000 names). The loop wakes on the
    `signals` meant for it (see Signals), and ends when they say the agent is stopping; it
    signals `look_within` (the shortest lease of the schedules read) when other replicas may
    have started runs of these jobs. `refresh_seconds` is how often schedules are re-read
    without a notification, `jitter_seconds` how much later than its fire time a replica may
    ask for an occurrence (so replicas spread) while it knows no peers to take turns with.
    """

    store: Store
    agent_id: str
    handlers: Handlers[Handler]
    declared: Mapping[str, JobSpec]
    workers: Workers
    housekeeper: Housekeeper
    planner: Planner
    clock: DbClock
    log: AgentLog
    health: DatabaseHealth
    signals: Signals
    refresh_seconds: float
    jitter_seconds: float
    # What the loop has learnt; set by the methods below only.
    _schedules: dict[str, Entry] = field(init=False, default_factory=dict)
    _warned: set[str] = field(init=False, default_factory=set)  # handlers without a schedule
    _overridden: dict[str, str] = field(init=False, default_factory=dict)  # job -> its owner
    _dirty: bool = field(init=False, default=True)  # any schedule may have changed
    _changed: set[str] = field(init=False, default_factory=set)  # these have (NOTIFY named them)
    _changed_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _refreshed_at: float = field(init=False, default=0.0)  # monotonic
    _sent: float = field(init=False, default=0.0)  # when the last claim left (monotonic)

    @property
    def names(self) -> list[str]:
        """The handlers' jobs, sorted (kept so: a reclaim statement sends them and sorts
        nothing)."""
        return self.handlers.names

    # -- what wakes the loop -----------------------------------------------------------------

    def schedules_changed(self, names: set[str] | None = None) -> None:
        """These schedules were written (None: any may have been): read them again on the
        next pass, now."""
        if names is None:
            self._dirty = True
        else:
            with self._changed_lock:
                self._changed |= names
        self.signals.wake.set()

    # -- the loop ----------------------------------------------------------------------------

    def start(self, supervisor: Supervisor) -> None:
        """Start the claim loop on a watched thread of its own."""
        supervisor.spawn("claimsched-claims", self.loop)

    def stop(self) -> None:
        """Wake the loop so that it sees the agent stopping."""
        self.signals.wake.set()

    def loop(self) -> None:
        wake, stopping = self.signals.wake, self.signals.stopping
        delay = 0.0
        while not stopping.is_set():
            wake.wait(delay)
            wake.clear()
            if stopping.is_set():
                return
            try:
                delay = self.claim_pass()
                self.health.succeeded()
            except DatabaseError as exc:
                delay = self.health.failed(exc)

    def claim_pass(self) -> float:
        """One wake-up: re-read schedules if needed, reclaim, claim. Returns seconds to sleep.

        Until it returns, a freed slot wakes the loop again; it stops doing so only when the
        pass ends with nothing left that a slot would let it do."""
        self.signals.starved = True
        self._read_news()
        capacity = self.workers.free()
        if not capacity:
            return FULL_WAIT  # a freed slot wakes the loop
        if not self._schedules:
            return self._satisfied()
        candidates = self._candidates(capacity)
        if not candidates:
            return 0.0 if self.planner.truncated else self._satisfied()
        claimed = self.store.claims.claim(self.agent_id, candidates, capacity, self._sending)
        if claimed is None:
            return 0.0  # stopping: the loop ends
        results = self._started(*claimed)
        return self._next_wake_up(results, self.planner.learn(results))

    def _read_news(self) -> None:
        """Act on what woke the loop: forget cursors after an outage, re-read the schedules
        that changed (all of them, now and then), reclaim runs that want an owner."""
        signals = self.signals
        if signals.catch_up:  # recovered: any schedule may have changed meanwhile
            signals.catch_up, self._dirty = False, True
            self.planner.forget()
        if (self._dirty or self._changed
                or time.monotonic() - self._refreshed_at > self.refresh_seconds):
            self._refresh_schedules()
        if signals.next_retry is not None and time.monotonic() >= signals.next_retry:
            signals.next_retry, signals.reclaim = None, True
        if signals.reclaim and self.workers.free():
            signals.reclaim = False
            self._take_over(self.workers.free())

    def _candidates(self, capacity: int) -> list[Candidate]:
        """What to propose: the planner's candidates, and of the occurrences handed to us by
        their first claimer, those it left unclaimed."""
        candidates = self.planner.plan(self._schedules, self.clock.now(), capacity)
        if self.planner.checks:  # handed to us: claim only what their first claimer left
            checks = self.planner.checks
            unclaimed = self.store.claims.unclaimed(checks)
            if len(unclaimed) < len(checks):  # their first claimers took some
                self.signals.others_may_run()
            candidates += self.planner.confirmed(unclaimed)
        return candidates

    def _started(self, db_now: datetime, results: list[ClaimResult]) -> list[ClaimResult]:
        """Count the claim's outcomes and start a run for each lease won; returns `results`."""
        self.clock.observe(db_now, self._sent, time.monotonic())
        lost = 0
        for result in results:
            if result.outcome in LOST:
                lost += 1
                continue
            metrics.CLAIMS.labels(result.job_name, result.outcome).inc()
            if result.lease is not None:
                self._start(result.lease, "claimed")
        if lost:
            metrics.CLAIMS_LOST.inc(lost)
        if any(result.outcome in HELD for result in results):
            self.signals.others_may_run()
        return results

    def _next_wake_up(self, results: list[ClaimResult], blocked: set[str]) -> float:
        """Seconds to sleep after a claim: the first row of WAKE_UP whose outcome blocked a
        job decides; with none, until the next occurrence."""
        if self.planner.truncated and any(result.outcome in SETTLED for result in results):
            blocked = blocked | {MORE}
        for outcome, wake_up in WAKE_UP.items():
            if outcome in blocked:
                return wake_up(self, results)
        return self._sleep_seconds() if blocked else self._satisfied()

    def _reread(self, results: list[ClaimResult]) -> float:
        """The schedule changed since we read it: read it, plan again."""
        self.schedules_changed({r.job_name for r in results if r.outcome == "stale"})
        return 0.0

    def _free_slots_now(self, results: list[ClaimResult]) -> float:
        """Races lost to other replicas left slots free: try the remaining ones at once."""
        return 0.0 if self.workers.free() else FULL_WAIT

    def _take_over(self, free: int) -> None:
        """Reclaim runs that want an owner, as many as `free` slots, and start them. Those that
        may have left work behind are followed: their end looks again (run_ended)."""
        # The database reads the job list from our presence row when it holds it.
        jobs = None if self.housekeeper.listed else self.names
        leases = self.store.claims.reclaim(self.agent_id, jobs, free, self._claiming)
        full = len(leases) >= free  # more may wait than there were slots
        for lease in leases:
            metrics.RECLAIMS.labels(lease.job_name).inc()
            if full or self._holds_back(lease.job_name):
                self.signals.follow(lease)  # before it starts: it may end at once
            self._start(lease, "reclaimed")

    def _holds_back(self, job_name: str) -> bool:
        """Whether the database lets this job's other waiting runs start only once the one it
        gave us ends: Forbid (cs_reclaim starts one run of such a job at a time). A job whose
        schedule we have not read may be Forbid."""
        entry = self._schedules.get(job_name)
        return entry is None or entry.shape.concurrency_policy == "Forbid"

    def _claiming(self) -> bool:
        return not self.signals.stopping.is_set()

    def _sending(self) -> bool:
        """`_claiming`, asked with a connection at hand: the claim leaves now (the clock's
        sample starts here, not before a wait for a connection)."""
        self._sent = time.monotonic()
        return self._claiming()

    def _satisfied(self) -> float:
        """Nothing waits for a slot: sleep until the next occurrence, whatever ends meanwhile."""
        self.signals.starved = self.signals.reclaim
        return self._sleep_seconds()

    def _sleep_seconds(self) -> float:
        delay = self.refresh_seconds
        nxt = self.planner.next_due(self._schedules, self.clock.now())
        if nxt is not None:
            # Peers take turns (turns.py): the first claimer need not wait for the others.
            jitter = 0.0 if self.planner.turns.shared else self.jitter_seconds
            delay = min(delay, self.clock.seconds_until(nxt) + random.uniform(0, jitter))
        next_retry = self.signals.next_retry
        if next_retry is not None:
            delay = min(delay, next_retry - time.monotonic())
        return max(0.0, delay)

    def _start(self, lease: Lease, how: str) -> None:
        late = (lease.started_at - lease.fire_time).total_seconds()
        if how == "claimed" and late > 2 * max(self.jitter_seconds, 1.0):
            metrics.CATCH_UP.labels(lease.job_name).inc()
        if self.log.isEnabledFor(logging.DEBUG):
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
        self.workers.begin(lease, self.handlers[lease.job_name])

    # -- schedules ---------------------------------------------------------------------------

    def declare(self, spec: JobSpec) -> None:
        """Write a code declaration (at start, and when its row was released or is gone)."""
        written = retry_conflicts(functools.partial(self.store.schedules.upsert, spec))
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

    def _refresh_schedules(self) -> None:
        """Read the schedules that changed: those notifications named, or, when any may have
        (start, reconnection, the periodic re-read), those whose last change is not the one
        held. Unchanged ones keep their entry: the planner looks only at the new ones."""
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        held = self._schedules
        names: AbstractSet[str] = changed & self.handlers.keys()
        if self._dirty or time.monotonic() - self._refreshed_at > self.refresh_seconds:
            self._dirty = False
            self._refreshed_at = time.monotonic()
            names = self._outdated(held) | names if held else self.handlers.keys()
        if not names:
            return
        entries, owners = self._read(names)
        orphaned = [spec for name, spec in self.declared.items() if name in names and (
            name not in owners or released(*owners[name]))]
        for spec in orphaned:  # a ClaimSchedule let go of it: the declaration takes it back
            self.declare(spec)
        if orphaned:
            entries, owners = self._read(names)
        for name, (source, owner) in owners.items():
            self._owned_by(name, None if source == "code" else describe_owner(source, owner))
        # A new mapping (the planner sees which entries are new); the first is the one read.
        schedules = dict(held) if held else entries
        for name in sorted([n for n in names if n not in entries]):  # no set of all names
            schedules.pop(name, None)
            if name not in self._warned:
                self._warned.add(name)
                self.log.warning(
                    "job %s has a handler but no schedule yet; it will run once one exists",
                    name,
                    extra={"job": name, "action": "no_schedule"},
                )
        if held:
            for name, entry in entries.items():
                schedules[name] = held[name] if held.get(name) == entry else entry
        self._schedules = schedules

    def _outdated(self, held: Mapping[str, Entry]) -> set[str]:
        """The handlers' jobs whose row is not the one held: new, changed (their updated_at,
        read one row at a time) or gone."""
        outdated: set[str] = set()
        found = 0
        for name, updated in self.store.schedules.versions():
            entry = held.get(name)
            if entry is not None:
                found += 1
                if entry.updated != micros(updated):
                    outdated.add(name)
            elif name in self.handlers:
                outdated.add(name)
        if found < len(held):  # rows gone without a notification (rare): which ones
            outdated |= held.keys() - {name for name, _ in self.store.schedules.versions()}
        return outdated

    def _read(self, names: AbstractSet[str]
              ) -> tuple[dict[str, Entry], dict[str, tuple[str, str | None]]]:
        """The entries of these schedules (all of them are read at once when that is most of
        them), and the source and owner of the declared ones among them. Each row becomes an
        entry as it comes (an agent never holds 100,000 rows), keyed by the handler's own
        name string (not a copy per map); equal entries are one object."""
        everything = len(names) * 2 > len(self._schedules) and len(names) > 1000
        entries: dict[str, Entry] = {}
        owners: dict[str, tuple[str, str | None]] = {}
        shared = Sharing()
        # The shortest lease of the schedules: of all of them when all are read, else of these
        # and of those read before (a lease that grew counts until the next full read).
        shortest = None if len(names) >= len(self.handlers) else self.signals.shortest_lease
        for record in self.store.schedules.each(None if everything else sorted(names)):
            name = record.job_name
            if name in names:
                name = self.handlers.own(name) or name
                entries[name] = Entry.of(record, shared)
                if name in self.declared:
                    owners[name] = (record.source, record.owner)
                if shortest is None or record.lease_seconds < shortest:
                    shortest = record.lease_seconds
        self.signals.shortest_lease = shortest
        return entries, owners


#: The claim's outcome -> the next wake-up, the first row that blocked a job deciding.
WAKE_UP: dict[str, Callable[[Claimer, list[ClaimResult]], float]] = {
    "stale": Claimer._reread,
    "not_due": lambda _, __: NOT_DUE_WAIT,  # our clock ran ahead; its offset is corrected now
    "no_capacity": Claimer._free_slots_now,
    MORE: Claimer._free_slots_now,
    "contended": lambda _, __: CONTENDED_WAIT,
    "deferred": lambda _, __: RETRY_WAIT,
}
