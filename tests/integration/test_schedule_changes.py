"""Schedule changes reach agents by name: the notification names the rows, an agent reads those
(or, when any may have changed, those whose last change it does not hold), and keeps the rest."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from claimsched import Agent, Run
from claimsched.db import NOTIFY_SCHEDULES, Listener, Poller, Store
from claimsched.db.schedules import SCHEDULE_BATCH
from tests.helpers.pgbouncer import pgbouncer
from tests.helpers.polling import wait_for

from .support import sql

JOBS = [f"job{i:03d}" for i in range(60)]


def _insert(dsn: str, names: list[str], schedule: str = "0 3 * * *") -> None:
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule, source) "
             "SELECT n, %s, 'cli' FROM unnest(%s::text[]) AS n", [schedule, names])


@pytest.fixture
def listener(store: Store) -> Iterator[Listener]:
    found = store.listener()
    assert isinstance(found, Listener)
    found.listen()
    yield found
    found.dispose()


def _named(listener: Listener) -> set[str] | None:
    wait_for(lambda: NOTIFY_SCHEDULES in listener.wait(0.2), "a schedule notification",
             timeout=10)
    return listener.changed()


def test_a_schedule_notification_names_the_rows_a_statement_changed(
    dsn: str, listener: Listener
) -> None:
    _insert(dsn, ["a", "b"])
    assert _named(listener) == {"a", "b"}
    sql(dsn, "UPDATE job_schedule SET schedule = '0 4 * * *' WHERE job_name = 'a'")
    assert _named(listener) == {"a"}
    sql(dsn, "DELETE FROM job_schedule WHERE job_name = 'b'")
    assert _named(listener) == {"b"}
    # Too many names for one notification (8000 bytes): any may have changed.
    _insert(dsn, [f"{'x' * 100}{i:04d}" for i in range(200)])
    assert _named(listener) is None
    assert listener.changed() == set()


def test_an_agent_reads_only_the_changed_schedules_and_drops_a_deleted_one(dsn: str) -> None:
    _insert(dsn, JOBS)
    agent = Agent(dsn, agent_id="reader", housekeeping_seconds=0.3)
    for name in JOBS:
        agent.job(name)(lambda run: None)
    agent.start()
    try:
        wait_for(lambda: len(agent.claimer._schedules) == len(JOBS), "the schedules read",
                 timeout=10)
        before = dict(agent.claimer._schedules)
        sql(dsn, "UPDATE job_schedule SET schedule = '@every 1h' WHERE job_name = 'job001'")
        sql(dsn, "DELETE FROM job_schedule WHERE job_name = 'job002'")
        wait_for(lambda: "job002" not in agent.claimer._schedules
                 and agent.claimer._schedules["job001"].shape.schedule.expression == "@every 1h",
                 "the agent to read the changes", timeout=10)
        after = agent.claimer._schedules
        assert [n for n in JOBS[3:] if after[n] is not before[n]] == []  # kept, not re-read
    finally:
        agent.stop()


def test_a_re_read_finds_a_change_that_committed_after_a_later_one(store: Store,
                                                                   dsn: str) -> None:
    """updated_at is when a writer's transaction began, not when it committed: a change whose
    writer began first and committed last is still read (no high-water mark of updated_at)."""
    with _reading(dsn, "rereader", ["early", "late"]) as agent:
        with psycopg.connect(dsn) as slow:
            slow.execute("SET search_path = claimsched, public")
            slow.execute("UPDATE job_schedule SET schedule = '@every 2h' WHERE job_name = 'early'")
            sql(dsn, "UPDATE job_schedule SET schedule = '@every 3h' WHERE job_name = 'late'")
            agent.claimer.schedules_changed(None)  # any may have changed: as on reconnecting
            agent.claimer._refresh_schedules()
            assert agent.claimer._schedules["late"].shape.schedule.expression == "@every 3h"
            assert agent.claimer._schedules["early"].shape.schedule.expression == "0 3 * * *"
        agent.claimer.schedules_changed(None)
        agent.claimer._refresh_schedules()
        assert agent.claimer._schedules["early"].shape.schedule.expression == "@every 2h"


def _epoch(dsn: str) -> int:
    return int(sql(dsn, "SELECT epoch FROM schedule_epoch")[0][0])


def test_the_poll_sees_every_commit_that_wrote_schedules_whichever_writer_began_first(
    store: Store, dsn: str
) -> None:
    _insert(dsn, ["early", "late"])
    poller = Poller(lambda: store.claims.poll(None), 0.01)
    poller.listen()
    assert NOTIFY_SCHEDULES not in poller.wait(0.01)
    with psycopg.connect(dsn) as first:  # commits as the block ends
        first.execute("UPDATE claimsched.job_schedule SET schedule = '@every 2h'"
                      " WHERE job_name = 'early'")
        sql(dsn, "UPDATE job_schedule SET schedule = '@every 3h' WHERE job_name = 'late'")
        assert NOTIFY_SCHEDULES in poller.wait(0.01)
        assert NOTIFY_SCHEDULES not in poller.wait(0.01)  # the first has not committed yet
    assert NOTIFY_SCHEDULES in poller.wait(0.01)


def test_the_schedules_epoch_moves_once_per_transaction_that_wrote_them(dsn: str) -> None:
    before = _epoch(dsn)
    with psycopg.connect(dsn) as writer:  # two statements, many rows: one transaction
        writer.execute("SET search_path = claimsched, public")
        writer.execute("INSERT INTO job_schedule (job_name, schedule) VALUES ('a', '@daily'),"
                       " ('b', '@daily')")
        writer.execute("UPDATE job_schedule SET schedule = '@hourly'")
        assert _epoch(dsn) == before  # not before it commits
    assert _epoch(dsn) == before + 1
    with psycopg.connect(dsn) as writer:
        writer.execute("UPDATE claimsched.job_schedule SET schedule = '@hourly'"
                       " WHERE job_name = 'nothing'")
        writer.rollback()
        writer.execute("DELETE FROM claimsched.job_schedule WHERE job_name = 'nothing'")
    assert _epoch(dsn) == before + 1  # no row written: nothing to see
    sql(dsn, "DELETE FROM job_schedule WHERE job_name = 'a'")
    assert _epoch(dsn) == before + 2


def test_behind_a_pooler_a_change_that_began_first_and_committed_last_is_seen_within_a_poll(
    dsn: str,
) -> None:
    """Polling (pgbouncer, no listen_dsn): the writer that began first and committed last wrote
    an updated_at older than the one of a change already seen; the agent still notices its
    change at the next poll, not at the periodic re-read (600 s)."""
    _insert(dsn, ["early", "late"])
    sql(dsn, "UPDATE job_schedule SET enabled = false WHERE job_name = 'early'")
    ran = threading.Event()
    with pgbouncer(dsn) as bouncer:
        agent = Agent(bouncer.dsn_for(dsn), agent_id="poller", poll_seconds=0.3,
                      schedule_refresh_seconds=600, housekeeping_seconds=600)
        agent.job("early")(lambda run: ran.set())
        agent.job("late")(_nothing)
        with agent:
            assert isinstance(agent.notifications.listener, Poller)
            with psycopg.connect(dsn) as first:  # commits as the block ends
                first.execute("UPDATE claimsched.job_schedule SET enabled = true,"
                              " schedule = '@every 2s' WHERE job_name = 'early'")
                sql(dsn, "UPDATE job_schedule SET schedule = '@every 1h' WHERE job_name = 'late'")
                wait_for(lambda: agent.claimer._schedules["late"].shape.schedule.expression
                         == "@every 1h", "the agent to read the later writer's change",
                         timeout=10)
            wait_for(ran.is_set, "a run of the job the first writer enabled", timeout=10)


@contextmanager
def _reading(dsn: str, agent_id: str, names: list[str]) -> Iterator[Agent]:
    """An agent with handlers for `names` (their rows written) that has read them once, and
    reads again only when a test calls it to (no threads, no listener)."""
    _insert(dsn, names)
    agent = Agent(dsn, agent_id=agent_id)
    for name in names:
        agent.job(name)(_nothing)
    agent.store.open()
    try:
        agent.claimer._refresh_schedules()
        yield agent
    finally:
        agent.store.close()


def _nothing(run: Run) -> None:
    pass


def test_every_schedule_is_read_batch_by_batch_in_name_order(store: Store, dsn: str) -> None:
    """The full read comes from a server-side cursor, SCHEDULE_BATCH rows at a time (an agent
    with 100,000 schedules never holds them all): every row still comes, once."""
    names = [f"many{i:05d}" for i in range(2 * SCHEDULE_BATCH + 7)]
    _insert(dsn, names)
    read = store.schedules.each()
    first = next(read)
    # The rest waits in the server's cursor, not in this process: the reader's last statement
    # fetched one batch.
    last = sql(dsn, "SELECT query FROM pg_stat_activity WHERE state = 'idle in transaction' "
                    "AND query LIKE 'FETCH%%'")
    assert [first.job_name] + [r.job_name for r in read] == names
    assert [q for (q,) in last] == [f'FETCH FORWARD {SCHEDULE_BATCH} FROM '
                                    '"claimsched_load_schedules"']


def test_a_re_read_drops_a_schedule_deleted_without_a_notification(dsn: str) -> None:
    with _reading(dsn, "dropper", ["kept", "gone"]) as agent:
        kept = agent.claimer._schedules["kept"]
        assert set(agent.claimer._schedules) == {"kept", "gone"}
        sql(dsn, "DELETE FROM job_schedule WHERE job_name = 'gone'")
        agent.claimer.schedules_changed(None)  # no listener here: as after reconnecting
        agent.claimer._refresh_schedules()
        assert set(agent.claimer._schedules) == {"kept"}
        assert agent.claimer._schedules["kept"] is kept  # unchanged: not read again
