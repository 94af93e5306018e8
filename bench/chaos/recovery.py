"""The recovery faults: a replica paused while it holds a reclaimed run, a replica killed while
it works a backfill, and the whole fleet down for a while.

- pause_reclaimer: waits for a replica that holds a running run at its second attempt or later
  (a reclaimed orphan first; a retried failure when no reclaim comes), SIGSTOPs it for that
  run's lease and `duration` seconds more, then SIGCONTs it. Its attempt is reclaimed under it;
  what it does when it wakes is fenced out.
- kill_backfiller: backfills occurrences of `job` from before its schedule began, waits for a
  replica to work one, and SIGKILLs it (restarted `duration` seconds later). When they ran
  and ended on replicas it may not take, it backfills more, from further back.
- fleet_down: stops every replica at once (SIGTERM or SIGKILL each, `value`'s bits), keeps the
  fleet down `duration` seconds (longer than every period, far shorter than the catch-up
  windows), then starts every replica again. What fell meanwhile is caught up per policy.

The first two choose their replica when they run: any that no fault holds and whose lane is
idle then (their lane moves there: faults.Lanes); they SIGSTOP it first and check that the run
is still its own, and look again if not. One that finds none in time did not happen
(Event.happened) and says so. What they did goes to a RecoveryLog for the checks
(recovery_checks.py).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg

from claimsched.db import Store
from claimsched.errors import ClaimschedError

from .faults import FLEET, GRACE, STARTUP, Event, Fault, Lanes, Slot
from .recovery_checks import RecoveryLog, Taken

PAUSE_RECLAIMER, KILL_BACKFILLER, FLEET_DOWN = "pause_reclaimer", "kill_backfiller", "fleet_down"
RECOVERY_FAULTS = (PAUSE_RECLAIMER, KILL_BACKFILLER, FLEET_DOWN)
RECLAIMED_WAIT = 3.0  # seconds a pause_reclaimer looks for a reclaimed run to pause
BACKFILL_WAIT = 5.0  # seconds a kill_backfiller waits for its backfill to be worked
# kill_backfiller backfills BACKFILL_RUNS occurrences ending this many periods before its job's
# schedule began, and further back for each more: the backfill fault's ranges end closer, so
# each range queues occurrences of its own.
BACKFILL_FROM, BACKFILL_RUNS = 11, 3
BACKFILL_AGAIN = 1000  # periods further back for each more backfill of one kill_backfiller
POLL = 0.05


def work_seconds(job: dict[str, Any]) -> float:
    """How long a chaos handler of `job` works when nothing goes wrong."""
    return sum(float(job.get(key, 0)) for key in ("sleep", "once_sleep", "tail"))


def retried_job(rng: random.Random) -> dict[str, Any]:
    """Allow, every second: its first attempt fails at once, its second (a retry) does its
    effects and works on for seconds after the last one. Some second attempt is nearly always
    running somewhere: what a pause_reclaimer pauses when no reclaimed orphan is."""
    return {
        "name": "retried-allow",
        "kind": "chaos",
        "period": 1,
        "schedule": "@every 1s",
        "concurrency_policy": "Allow",
        "catch_up_policy": "All",
        "lease_seconds": rng.choice([3, 4]),
        "heartbeat_seconds": 1,
        "retry_on_failure": True,
        "max_attempts": 5,
        "before": "prepare",
        "sleep": 0.05,
        "fail_every": 1,
        "fail_attempts": 1,
        "once": "notify",
        "once_sleep": 0.05,
        "after": "report",
        "tail": round(rng.uniform(2.0, 3.0), 1),
    }


def plan_recovery(
    kind: str,
    rng: random.Random,
    jobs: list[dict[str, Any]],
    replicas: int,
    backfills: Counter[str],
) -> tuple[float, float, float, str]:
    """(duration, slack, value, job) of a recovery fault: `slack` is what its lane needs beyond
    `duration` (the wait for a run to act on, a lease, a graceful stop, a restart)."""
    lease_max = max(j["lease_seconds"] for j in jobs)
    period_max = max(j["period"] for j in jobs)
    if kind == PAUSE_RECLAIMER:  # duration: seconds paused beyond the run's lease
        return rng.uniform(1.5, 3.0), RECLAIMED_WAIT + lease_max + 1.0, 0.0, ""
    if kind == KILL_BACKFILLER:  # duration: seconds down; value: periods before the schedule
        # a handler whose first attempt works long enough to be killed at work; Allow first: a
        # Forbid job that overruns its period may start its backfill only after the wait
        long = [j for j in jobs if work_seconds(j) >= 1.0 and not j.get("fail_every")] or jobs
        allow = [j for j in long if j["concurrency_policy"] == "Allow"]
        job = rng.choice([j["name"] for j in allow or long])
        value = BACKFILL_FROM + BACKFILL_RUNS * backfills[job]
        backfills[job] += 1
        return rng.uniform(0.5, 2.0), BACKFILL_WAIT + STARTUP, float(value), job
    if kind == FLEET_DOWN:  # duration: seconds down; value: bit i set = SIGTERM of slot i
        graceful = rng.randint(1, 2**replicas - 2) if replicas > 1 else rng.randint(0, 1)
        down = rng.uniform(period_max + 0.2, period_max + 1.2)
        return down, GRACE + STARTUP, float(graceful), ""
    raise ValueError(f"not a recovery fault: {kind}")


class Fleet(Protocol):
    """What the recovery faults use of a running storm (storm.ChaosRun)."""

    dsn: str
    jobs: list[dict[str, Any]]
    slots: dict[str, Slot]
    lanes: Lanes
    active_since: dict[str, datetime]

    def now(self) -> float: ...

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]: ...

    def started(self, slot: Slot) -> bool: ...

    def launch(self, slot: Slot) -> None: ...

    def bring_down(self, slot: Slot, graceful: bool, event: Event) -> None: ...


@dataclass(frozen=True)
class Held:
    """A running run and the replica that holds it, as job_runs said."""

    job: str
    fire: datetime
    attempt: int
    agent: str
    lease: int
    elapsed: float  # seconds since this attempt started
    previous: str | None  # how the attempt before it ended (job_attempts), if any

    @property
    def reclaimed(self) -> bool:
        """Whether it took over an orphan (not a retry of a failure)."""
        return self.previous in ("orphaned", "fenced_out")

    def taken(self) -> Taken:
        return (self.job, self.fire, self.attempt, self.agent)

    def __str__(self) -> str:
        return f"{self.job} @ {self.fire:%H:%M:%S} attempt {self.attempt}"


HELD = """
SELECT r.job_name, r.fire_time, r.attempt, r.claimed_by, s.lease_seconds,
       extract(epoch FROM now() - r.started_at)::float8, a.outcome
FROM claimsched.job_runs r
JOIN claimsched.job_schedule s ON s.job_name = r.job_name
LEFT JOIN claimsched.job_attempts a
    ON a.job_name = r.job_name AND a.fire_time = r.fire_time AND a.attempt = r.attempt - 1
WHERE r.status = 'running' AND r.lease_until > now() AND r.claimed_by = ANY(%(agents)s)
  AND r.job_name < 'w'  -- the storm's jobs (j..), not the wide soak's light ones (w....)
  AND (CASE WHEN %(job)s::text IS NULL THEN r.attempt >= 2
            ELSE r.kind = 'backfill' AND r.job_name = %(job)s
                 AND r.fire_time = ANY(%(fires)s::timestamptz[]) END)
"""

STILL_HELD = """
SELECT count(*) FROM claimsched.job_runs
WHERE job_name = %s AND fire_time = %s AND attempt = %s AND claimed_by = %s
  AND status = 'running'
"""


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP took hold), per /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _stop(slot: Slot) -> bool:
    """SIGSTOP the slot's replica and wait (bounded) until it is stopped."""
    replica = slot.replica
    assert replica is not None
    replica.signal(signal.SIGSTOP)
    deadline = time.monotonic() + 2.0
    while not _stopped(replica.process.pid):
        if time.monotonic() > deadline or not replica.alive:
            return False
        time.sleep(0.01)
    return True


class RecoveryFaults:
    """Runs the recovery faults of one storm and keeps what they did in `log`."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.log = RecoveryLog()
        self._lock = threading.Lock()

    def run(self, fault: Fault, event: Event) -> None:
        if fault.kind == PAUSE_RECLAIMER:
            self.pause_reclaimer(fault, event)
        elif fault.kind == KILL_BACKFILLER:
            self.kill_backfiller(fault, event)
        elif fault.kind == FLEET_DOWN:
            self.fleet_down(fault, event)
        else:
            raise ValueError(f"not a recovery fault: {fault.kind}")

    # -- a reclaimed run's owner paused past the lease ---------------------------------------------

    def pause_reclaimer(self, fault: Fault, event: Event) -> None:
        began = time.monotonic()
        while time.monotonic() < began + RECLAIMED_WAIT:
            # reclaimed orphans first, then retried failures, each the one with most work left
            held = self._held()
            held.sort(key=lambda h: (not h[1].reclaimed, h[1].elapsed - self._work(h[1])))
            for slot, run in held[:1]:
                if self._pause(slot, run, fault, event):
                    return
            time.sleep(POLL)
        event.happened = False
        event.detail = f"no reclaimed run on a free replica within {RECLAIMED_WAIT:g}s"

    def _pause(self, slot: Slot, run: Held, fault: Fault, event: Event) -> bool:
        if not self.fleet.lanes.take(fault.target, slot, self.fleet.now()):
            return False
        try:
            replica = slot.replica
            assert replica is not None
            stopped = _stop(slot)
            if not stopped or not self._still_held(run):  # it finished first: look again
                replica.signal(signal.SIGCONT)
                return False
            pause = run.lease + fault.duration
            time.sleep(pause)
            if replica.alive:
                replica.signal(signal.SIGCONT)
        finally:
            self.fleet.lanes.give(slot)
        with self._lock:
            self.log.paused.append(run.taken())
        how = f"reclaimed from {run.previous}" if run.reclaimed else "retried after it failed"
        event.target = run.agent
        event.detail = f"{run} ({how}) paused {pause:.1f}s, its lease {run.lease}s"
        return True

    # -- a backfill's worker killed ------------------------------------------------------------

    def kill_backfiller(self, fault: Fault, event: Event) -> None:
        job = next(j for j in self.fleet.jobs if j["name"] == fault.job)
        deadline = time.monotonic() + BACKFILL_WAIT
        periods = int(fault.value)
        fires, queued, again = self._batch(job, periods, deadline, event)
        if queued is None:
            event.happened = False
            return
        while time.monotonic() < deadline:
            # any of them: the first one's replica may be held by another fault right now
            for slot, run in self._held(job["name"], fires):
                if self._kill(slot, run, fault, event):
                    event.detail += f"; {len(queued)} of {len(fires)} backfilled occurrences new"
                    return
            if time.monotonic() > again:
                # they ran and ended where a fault (planned or at work) held the replica: more,
                # from further back (clear of every other backfill's range), for a free one
                periods += BACKFILL_AGAIN
                fires, more, again = self._batch(job, periods, deadline, event)
                queued = more or []
            time.sleep(POLL)
        event.happened = False
        event.detail = (f"backfilled {len(queued)} of {job['name']}: none worked on a free "
                        f"replica within {BACKFILL_WAIT:g}s")

    def _batch(self, job: dict[str, Any], periods: int, deadline: float, event: Event
               ) -> tuple[list[datetime], list[datetime] | None, float]:
        """Backfill `job` from `periods` periods back: its fire times, those that were new (None
        if Postgres never answered), and when they will have had time to be worked."""
        fires = self._backfill_times(job, periods)
        queued = self._backfill(job["name"], fires, deadline, event)
        return fires, queued, time.monotonic() + work_seconds(job) + 0.5

    def _backfill(self, job: str, fires: list[datetime], deadline: float,
                  event: Event) -> list[datetime] | None:
        """Queue the backfill (as `claimsched backfill` does), trying again while Postgres is
        away until `deadline`; the fire times that were new, or None if it never answered."""
        while True:
            try:
                store = Store(self.fleet.dsn)
                try:
                    return store.listings.request_runs(job, fires, "backfill")
                finally:
                    store.close()
            except (psycopg.Error, ClaimschedError) as exc:
                if time.monotonic() > deadline:
                    event.detail = f"backfill refused: {type(exc).__name__}: {str(exc)[:120]}"
                    return None
            time.sleep(0.25)

    def _backfill_times(self, job: dict[str, Any], periods: int) -> list[datetime]:
        """BACKFILL_RUNS occurrences of an `@every` job, the last `periods` periods before its
        schedule began."""
        period = int(job["period"])
        since = self.fleet.active_since[job["name"]].timestamp()
        last = (int(since) // period - periods) * period
        return [datetime.fromtimestamp(last - i * period, UTC) for i in range(BACKFILL_RUNS)]

    def _kill(self, slot: Slot, run: Held, fault: Fault, event: Event) -> bool:
        if not self.fleet.lanes.take(fault.target, slot, self.fleet.now()):
            return False
        try:
            replica = slot.replica
            assert replica is not None
            if not _stop(slot) or not self._still_held(run):  # it finished first: look again
                replica.signal(signal.SIGCONT)
                return False
            self.fleet.bring_down(slot, False, Event(self.fleet.now(), fault.kind, run.agent))
            with self._lock:
                self.log.killed.append(run.taken())
            time.sleep(fault.duration)
            self.fleet.launch(slot)
        finally:
            self.fleet.lanes.give(slot)
        event.target = run.agent
        event.detail = f"SIGKILL while it worked backfilled {run}, down {fault.duration:.1f}s"
        return True

    # -- every replica down, then back ---------------------------------------------------------

    def fleet_down(self, fault: Fault, event: Event) -> None:
        slots = sorted(self.fleet.slots.values(), key=lambda s: s.name)
        for slot in slots:  # a fault that holds one now ends first
            slot.lock.acquire()
        try:
            for slot in slots:
                slot.held = True
            how = self._stop_all(slots, int(fault.value))
            down_at = datetime.now(UTC)
            time.sleep(fault.duration)
            up_at = datetime.now(UTC)
            for slot in slots:
                self.fleet.launch(slot)
        finally:
            for slot in slots:
                slot.held = False
                slot.lock.release()
        with self._lock:
            self.log.fleet_down.append((down_at, up_at))
        event.target = FLEET
        event.detail = f"{how}; all down {(up_at - down_at).total_seconds():.1f}s"

    def _stop_all(self, slots: list[Slot], graceful_bits: int) -> str:
        """SIGTERM (bit set) or SIGKILL every replica at once and wait for every exit; a
        replica a freeze fault stopped cannot act on SIGTERM: it gets SIGKILL."""
        ways: dict[str, list[str]] = {"SIGTERM": [], "SIGKILL": []}
        threads = []
        for index, slot in enumerate(slots):
            replica = slot.replica
            frozen = replica is not None and _stopped(replica.process.pid)
            graceful = bool(graceful_bits >> index & 1) and not frozen
            ways["SIGTERM" if graceful else "SIGKILL"].append(
                slot.agent_id + (" (frozen)" if frozen else "")
            )
            scratch = Event(self.fleet.now(), FLEET_DOWN, slot.agent_id)
            thread = threading.Thread(target=self.fleet.bring_down, args=(slot, graceful, scratch),
                                      name=f"chaos-down-{slot.name}", daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return "; ".join(f"{way} {', '.join(ids)}" for way, ids in ways.items() if ids)

    # -- helpers -------------------------------------------------------------------------------

    def _held(self, job: str | None = None,
              fires: list[datetime] | None = None) -> list[tuple[Slot, Held]]:
        """Running runs (at their second attempt or later; or the backfilled `fires` of `job`)
        of live replicas that no fault holds."""
        free = {
            s.agent_id: s
            for s in self.fleet.slots.values()
            if not s.held and s.replica is not None and s.replica.alive
        }
        try:
            rows = self.fleet.query(HELD, {"agents": list(free), "job": job, "fires": fires})
        except psycopg.Error:  # Postgres may be away: look again
            return []
        return [(free[row[3]], Held(*row)) for row in rows]

    def _work(self, run: Held) -> float:
        return next((work_seconds(j) for j in self.fleet.jobs if j["name"] == run.job), 0.0)

    def _still_held(self, run: Held) -> bool:
        try:
            ((count,),) = self.fleet.query(STILL_HELD, run.taken())
        except psycopg.Error:
            return False
        return bool(count)
