"""The agent's parts on their own: each gets what it uses (its statements, the signals, a clock,
a log), so each can be driven here without a database, and the tests wait on the signals the
parts emit. What they send is tested on a real Postgres elsewhere."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from claimsched.clock import DbClock
from claimsched.errors import DatabaseConflict, DatabaseUnavailable, LeaseLost
from claimsched.health import DatabaseHealth, retry_conflicts
from claimsched.logs import AgentLog
from claimsched.plan.turns import Turns
from claimsched.records import Completion, Housekeeping, Lease
from claimsched.run.effects import Effects
from claimsched.run.heartbeat import Heartbeat
from claimsched.run.housekeeping import Housekeeper
from claimsched.run.runs import Run
from claimsched.run.signals import EXPIRY_MARGIN, EXPIRY_SPREAD, Signals
from claimsched.run.workers import Workers
from tests.helpers.polling import wait_for

LOG = AgentLog(logging.getLogger("claimsched.test"), {"agent": "a"})
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def lease(run_id: int = 1, *, attempt: int = 1, lease_seconds: float = 30.0) -> Lease:
    return Lease(id=run_id, job_name="job", fire_time=NOW, attempt=attempt,
                 lease_until=NOW + timedelta(seconds=lease_seconds), started_at=NOW,
                 lease_seconds=lease_seconds, heartbeat_seconds=lease_seconds / 3,
                 max_attempts=3, retry_on_failure=True, lease_token=uuid4())


class Book:
    """Receipts kept in a dict; `owner` is the attempt that still owns the occurrence."""

    def __init__(self) -> None:
        self.owner = 1
        self.keys: set[str] = set()

    def record(self, agent_id: str, lease: Lease, entity: str,
               conn: Any = None) -> tuple[bool, bool]:
        if lease.attempt != self.owner:
            return False, False
        new = entity not in self.keys
        self.keys.add(entity)
        return True, new

    @contextmanager
    def hold(self, agent_id: str, lease: Lease, entity: str) -> Iterator[tuple[bool, bool]]:
        owned, new = self.record(agent_id, lease, entity)
        yield owned, new


# -- effects ------------------------------------------------------------------------------------


def test_an_effect_is_true_once_and_refused_once_the_lease_is_lost() -> None:
    book = Book()
    effects = Effects(book, "a", lease())
    assert effects.record("mail:1") is True
    assert effects.record("mail:1") is False
    book.owner = 2
    with pytest.raises(LeaseLost, match="mail:2"):
        effects.record("mail:2")
    with pytest.raises(LeaseLost), effects.once("mail:3"):
        pytest.fail("the block must not run without the lease")


# -- housekeeping -------------------------------------------------------------------------------


def housekeeper(found: Housekeeping | Exception, calls: list[str]) -> Housekeeper:
    def sweep(listed: bool) -> Housekeeping:
        calls.append("sweep")
        if isinstance(found, Exception):
            raise found
        return found

    return keeper_of(sweep, calls)


@dataclass
class Sweeping:
    """Stands in for the housekeeping statement."""

    sweep: Callable[[bool], Housekeeping]

    def housekeeping(self, listed: bool) -> Housekeeping:
        return self.sweep(listed)


@dataclass
class Heard(Signals):
    """The signals, each also noted in `calls` in the order they came."""

    calls: list[str] = field(default_factory=list)

    def reaped(self) -> None:
        self.calls.append("reaped")
        super().reaped()

    def claimable(self) -> None:
        self.calls.append("claimable")
        super().claimable()

    def recovered(self) -> None:
        self.calls.append("recovered")
        super().recovered()


@dataclass
class Seen(Turns):
    """The peers housekeeping found, noted in `calls` when there are any."""

    calls: list[str] = field(default_factory=list)

    def seen(self, peers: tuple[str, ...]) -> None:
        if peers:
            self.calls.append("peers " + " ".join(peers))
        super().seen(peers)


def keeper_of(sweep: Callable[[bool], Housekeeping], calls: list[str]) -> Housekeeper:
    signals = Heard(DbClock(), calls=calls)
    return Housekeeper(Sweeping(sweep), period=0.01, clock=DbClock(), log=LOG,
                       health=DatabaseHealth(LOG, signals.recovered), signals=signals,
                       turns=Seen("a", calls=calls))


def test_a_sweep_that_reaped_runs_wakes_the_heartbeat_and_the_reclaim() -> None:
    calls: list[str] = []
    found = Housekeeping(orphaned=2, exhausted=0, overdue=0, claimable=True,
                         db_now=datetime.now(UTC) + timedelta(seconds=60))
    keeper = housekeeper(found, calls)
    keeper.once()
    assert calls == ["sweep", "reaped", "claimable"]


def test_every_sweep_tells_the_peers_it_found() -> None:
    calls: list[str] = []
    found = Housekeeping(0, 0, 0, False, datetime.now(UTC), peers=("a", "b"))
    housekeeper(found, calls).once()
    assert calls == ["sweep", "peers a b"]


def test_a_quiet_sweep_wakes_nobody() -> None:
    calls: list[str] = []
    housekeeper(Housekeeping(0, 0, 0, False, datetime.now(UTC)), calls).once()
    assert calls == ["sweep"]


def test_the_job_list_is_sent_once_and_again_at_once_when_the_row_lost_it() -> None:
    rows = [True, True, True, False, True, True]  # the row holds the list after each sweep
    sent: list[bool] = []

    def sweep(listed: bool) -> Housekeeping:
        sent.append(listed)
        return Housekeeping(0, 0, 0, False, datetime.now(UTC), present=rows.pop(0))

    housekeeping = keeper_of(sweep, [])
    for _ in range(4):
        housekeeping.once()
    assert sent == [True, False, False, False, True]
    housekeeping.once()
    assert sent[5:] == [False]


def test_the_next_sweep_comes_right_after_the_next_lease_end_it_found_and_never_before() -> None:
    calls: list[str] = []
    now = datetime.now(UTC)
    keeper = housekeeper(Housekeeping(0, 0, 0, False, now, next_expiry=now + timedelta(seconds=2)),
                         calls)
    keeper.period = 30.0
    before = time.monotonic()
    keeper.once()
    after = time.monotonic()
    # measured from the sweep's db_now, from when its answer came: never before the lease's end
    assert before + 2 + EXPIRY_MARGIN <= keeper.due() <= after + 2 + EXPIRY_MARGIN + EXPIRY_SPREAD


def test_without_a_lease_to_watch_the_next_sweep_comes_after_the_period() -> None:
    keeper = housekeeper(Housekeeping(0, 0, 0, False, datetime.now(UTC)), [])
    keeper.period = 30.0
    before = time.monotonic()
    keeper.once()
    assert keeper.due() >= before + 30


def test_runs_started_elsewhere_are_looked_at_within_their_lease_once_however_often_told() -> None:
    keeper = housekeeper(Housekeeping(0, 0, 0, False, datetime.now(UTC)), [])
    keeper.period = 30.0
    keeper.once()
    before = time.monotonic()
    keeper.signals.look_within(3.0)
    first = keeper.due()
    assert before + 3 <= first <= time.monotonic() + 3 + EXPIRY_MARGIN + EXPIRY_SPREAD
    keeper.signals.look_within(3.0)
    keeper.signals.look_within(10.0)
    # still about 3 s from the first call (the earliest deadline holds): one sweep for all
    assert before + 3 <= keeper.due() <= first
    before = time.monotonic()
    keeper.once()  # saw them: back to the period
    assert keeper.due() >= before + 30


def test_the_loop_sweeps_at_the_end_of_a_lease_and_again_at_the_next_one_when_renewed() -> None:
    """Period 30 s: each sweep finds a lease ending 0.2 s later (renewed each time by its live
    owner): the loop follows the leases, not the period."""
    calls: list[str] = []

    def sweep(listed: bool) -> Housekeeping:
        calls.append("sweep")
        now = datetime.now(UTC)
        return Housekeeping(0, 0, 0, False, now, next_expiry=now + timedelta(seconds=0.2))

    keeper = keeper_of(sweep, calls)
    keeper.period = 30.0
    keeper.once()  # as the agent does before it starts the loop
    thread = threading.Thread(target=keeper.loop)
    thread.start()
    try:
        wait_for(lambda: calls.count("sweep") >= 4, "three sweeps, one per lease's end",
                 timeout=10)
    finally:
        keeper.signals.stopping.set()
        keeper.stop()
        thread.join(5)
    assert not thread.is_alive()


def test_the_housekeeping_loop_outlives_an_unreachable_database() -> None:
    calls: list[str] = []
    keeper = housekeeper(DatabaseUnavailable("cannot reach the database"), calls)
    thread = threading.Thread(target=keeper.loop)
    thread.start()
    wait_for(lambda: calls.count("sweep") >= 3, "three sweeps")
    keeper.signals.stopping.set()
    thread.join(5)
    assert not thread.is_alive()


# -- workers ------------------------------------------------------------------------------------


class Recorder:
    """Stands in for the completion statement: what it was given and what it answers."""

    def __init__(self, refuse: set[int] | None = None,
                 retry_at: datetime | None = None) -> None:
        self.refuse = refuse or set()
        self.retry_at = retry_at
        self.recorded: list[Completion] = []

    def complete(self, done: Sequence[Completion]) -> dict[int, datetime | None]:
        self.recorded.extend(done)
        return {c.lease.id: self.retry_at for c in done if c.lease.id not in self.refuse}


def heard() -> Signals:
    """Signals whose every test signal is kept, to wait on."""
    signals = Signals(DbClock())
    signals.test.init()
    return signals


def workers(recorder: Recorder, signals: Signals | None = None, size: int = 2,
            book: Book | None = None) -> Workers:
    return Workers(size, agent_id="a", receipts=book or Book(), completions=recorder,
                   signals=signals or heard(), log=LOG, health=DatabaseHealth(LOG, lambda: None),
                   backoff_base=2.0)


@contextmanager
def running(pool: Workers) -> Iterator[Workers]:
    completer = threading.Thread(target=pool.completer)
    completer.start()
    try:
        yield pool
    finally:
        pool.stop()
        completer.join(5)


def test_a_failed_handler_is_recorded_failed_with_its_error_and_a_retry_is_scheduled() -> None:
    later = NOW + timedelta(seconds=4)
    recorder, signals = Recorder(retry_at=later), heard()
    with running(workers(recorder, signals)) as pool:
        def handler(run: Run) -> None:
            raise ValueError("boom")

        pool.begin(lease(attempt=2), handler)
        retries = [signals.test.retry_at.wait()]
        signals.test.run_ended.wait()
    (done,) = recorder.recorded
    assert (done.status, done.error, done.backoff_seconds) == ("failed", "ValueError: boom", 4.0)
    assert retries + signals.test.retry_at.rest() == [later]
    assert pool.free() == pool.size


def test_a_handler_that_raises_once_its_lease_is_lost_is_fenced_out_not_failed() -> None:
    """LeaseLost from a refused receipt, or the handler's own exception once `run.lost` is
    set: the run is given back for its next attempt. A handler that returns is done."""
    book = Book()
    recorder, signals = Recorder(), heard()
    pool = workers(recorder, signals, size=3, book=book)

    def refused(run: Run) -> None:
        book.owner = 2  # taken over meanwhile: the receipt is refused
        run.effect("mail")

    def stops(run: Run) -> None:
        run.lost.set()  # as the heartbeat or the watchdog sets it
        raise RuntimeError("stopped: the lease was lost")

    def finishes(run: Run) -> None:
        run.lost.set()

    with running(pool):
        for number, handler in enumerate((refused, stops, finishes), start=1):
            pool.begin(lease(number), handler)
            assert signals.test.run_ended.wait().id == number
            assert len(recorder.recorded) == number
    assert [c.status for c in recorder.recorded] == ["fenced_out", "fenced_out", "done"]
    assert (recorder.recorded[0].error or "").startswith("LeaseLost: ")


def test_a_refused_completion_is_counted_not_retried() -> None:
    recorder, signals = Recorder(refuse={7}), heard()
    with running(workers(recorder, signals)) as pool:
        pool.begin(lease(7), lambda run: None)
        signals.test.run_ended.wait()
        assert pool.refused == 1
    assert recorder.recorded[0].status == "done"
    assert signals.test.retry_at.rest() == []


class Watching(Recorder):
    """Notes, as each completion statement is sent, how many ends were announced before it."""

    def __init__(self, signals: Signals, refuse: set[int]) -> None:
        super().__init__(refuse)
        self.ended = signals.test.run_ended
        self.sent: list[tuple[int, int]] = []  # (ends announced, runs recorded) before each

    def complete(self, done: Sequence[Completion]) -> dict[int, datetime | None]:
        self.sent.append((self.ended.count, len(self.recorded)))
        return super().complete(done)


def test_a_run_is_said_to_have_ended_once_its_completion_was_answered_recorded_or_refused(
) -> None:
    """The claim loop looks for a Forbid job's next waiting run when this says its run ended:
    before the completion is recorded, the database would still find the job busy."""
    signals = heard()
    recorder = Watching(signals, refuse={8})
    with running(workers(recorder, signals)) as pool:
        pool.begin(lease(7), lambda run: None)
        pool.begin(lease(8), lambda run: None)
        ended = [signals.test.run_ended.wait() for _ in range(2)]
    assert sorted(done.id for done in ended) == [7, 8]
    assert all(announced <= recorded for announced, recorded in recorder.sent)


def test_an_async_handler_is_awaited() -> None:
    recorder, seen, signals = Recorder(), [], heard()
    with running(workers(recorder, signals)) as pool:
        async def handler(run: Run) -> None:
            seen.append(run.job_name)

        pool.begin(lease(), handler)
        signals.test.run_ended.wait()
    assert seen == ["job"] and recorder.recorded[0].status == "done"


# -- heartbeat ----------------------------------------------------------------------------------


@dataclass
class Renewing:
    """Stands in for the heartbeat statement."""

    renew: Callable[[Sequence[Lease]], set[int]]

    def heartbeat(self, leases: Sequence[Lease]) -> set[int]:
        return self.renew(leases)


def heartbeat(renew: Callable[[Sequence[Lease]], set[int]], pool: Workers,
              signals: Signals | None = None) -> Heartbeat:
    return Heartbeat(Renewing(renew), pool, DatabaseHealth(LOG, lambda: None),
                     signals or heard())


def test_the_heartbeat_marks_a_run_it_no_longer_owns_lost_and_frees_its_slot() -> None:
    started = threading.Event()
    release = threading.Event()
    pool = workers(Recorder())

    def handler(run: Run) -> None:
        started.set()
        release.wait(5)

    kept, lost = pool.begin(lease(1), handler), pool.begin(lease(2), handler)
    started.wait(5)
    beat = heartbeat(lambda leases: {1}, pool)
    beat.renew()
    assert lost.lost.is_set() and not kept.lost.is_set()
    assert [s.run.lease.id for s in pool.slots()] == [1]
    release.set()
    pool.close()


def test_the_heartbeat_gives_up_a_lease_past_its_deadline_while_the_database_is_away() -> None:
    release = threading.Event()
    pool = workers(Recorder())
    run = pool.begin(lease(1, lease_seconds=0.05), lambda run: release.wait(5))

    def unreachable(leases: Sequence[Lease]) -> set[int]:
        raise DatabaseUnavailable("cannot reach the database")

    beat = heartbeat(unreachable, pool)
    beat.renew()
    assert not run.lost.is_set(), "still inside the lease"
    deadline = pool.slots()[0].deadline
    wait_for(lambda: time.monotonic() > deadline, "the end of the lease")
    beat.renew()
    assert run.lost.is_set()
    release.set()
    pool.close()


def test_the_heartbeat_backs_off_when_the_database_answers_errors_quickly() -> None:
    """A read-only node refuses every renewal at once: the heartbeat must not spin on it."""
    release = threading.Event()
    pool = workers(Recorder())
    pool.begin(lease(1, lease_seconds=30.0), lambda run: release.wait(5))
    sent: list[float] = []

    def read_only(leases: Sequence[Lease]) -> set[int]:
        sent.append(time.monotonic())
        raise DatabaseUnavailable("cannot execute UPDATE in a read-only transaction")

    signals = heard()
    beat = heartbeat(read_only, pool, signals)
    beat.kick()  # the first renewal at once; what follows is the backoff's business
    stopping = signals.stopping
    thread = threading.Thread(target=beat.loop)
    thread.start()
    wait_for(lambda: len(sent) >= 2, "a second renewal after the backoff", timeout=5)
    watched_until = time.monotonic() + 1.0
    wait_for(lambda: time.monotonic() > watched_until, "a second of failures", timeout=5)
    stopping.set()
    beat.kick()
    thread.join(5)
    release.set()
    pool.close()
    # Backoff 0.5 s, 1 s, 2 s ... (DatabaseHealth): a handful of statements, not thousands.
    assert len(sent) <= 6, f"{len(sent)} renewals in about 1.5 s"


def test_the_watchdog_loses_a_run_at_the_end_of_its_lease_without_asking_the_database() -> None:
    """Behind a partition the renewal never returns: the local deadline alone decides."""
    release = threading.Event()
    signals = heard()
    pool = workers(Recorder(), signals)
    run = pool.begin(lease(1, lease_seconds=0.3), lambda run: release.wait(5))
    hung = threading.Event()

    def partitioned(leases: Sequence[Lease]) -> set[int]:
        hung.wait(10)  # a black-holed connection: no answer, no error
        return set()

    beat = heartbeat(partitioned, pool, signals)
    stopping = signals.stopping
    # Renewals are due every 0.1 s; the first one hangs. The watchdog has a thread of its own.
    renewing = threading.Thread(target=beat.loop)
    watchdog = threading.Thread(target=beat.watch)
    deadline = pool.slots()[0].deadline
    renewing.start()
    watchdog.start()
    beat.expire()
    assert not run.lost.is_set()
    signals.test.slot_freed.wait(3)  # the watchdog lost the run and freed its slot
    assert run.lost.is_set()
    assert time.monotonic() >= deadline
    with pytest.raises(LeaseLost):
        run.effect("mail:1")
    stopping.set()
    hung.set()
    beat.kick()
    watchdog.join(5)
    renewing.join(12)
    release.set()
    pool.close()


def test_a_step_that_loses_a_deadlock_is_run_again_and_a_persistent_one_is_reported() -> None:
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise DatabaseConflict("retrying after a conflict with another transaction: deadlock")
        return "done"

    assert retry_conflicts(flaky) == "done" and len(tries) == 3

    def always() -> str:
        raise DatabaseConflict("deadlock detected")

    with pytest.raises(DatabaseConflict):
        retry_conflicts(always, tries=2)


def test_waiting_at_start_for_a_database_that_is_away_ends_when_the_agent_is_told_to_stop(
) -> None:
    """SIGTERM while the agent waits for its database at start: it stops waiting (the wait
    would otherwise last start_timeout_seconds, past a kubelet's grace)."""
    from claimsched.errors import DatabaseAway
    from claimsched.health import retry_away

    stopping = threading.Event()
    tries: list[float] = []

    def away() -> None:
        tries.append(time.monotonic())
        if len(tries) == 2:
            stopping.set()
        raise DatabaseAway("cannot reach the database")

    began = time.monotonic()
    with pytest.raises(DatabaseAway):
        retry_away(away, 60.0, LOG, stopping)
    assert len(tries) == 2 and time.monotonic() - began < 5.0
