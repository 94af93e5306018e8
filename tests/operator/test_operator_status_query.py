"""The status refresh sends a constant number of statements, however many schedules exist, and
runs no garbage collection while it builds its observations."""

from __future__ import annotations

import gc
import threading
from typing import Any

import psycopg
import psycopg_pool

from claimsched.db import OwnedSchedules, Store
from claimsched.schedule.schedules import Schedule
from claimsched_operator.observations import OccurrenceCounter, refresh

SENT: list[str] = []


class CountingCursor(psycopg.Cursor[Any]):
    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        SENT.append(str(query)[:60])
        return super().execute(query, params, **kwargs)


def counting_store(dsn: str) -> Store:
    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.autocommit = True
        conn.execute("SELECT set_config('search_path', 'claimsched, public', false)")

    pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
        dsn, min_size=1, max_size=2, open=True, configure=configure,
        kwargs={"cursor_factory": CountingCursor})
    return Store(pool=pool)


def seed(dsn: str, count: int) -> dict[str, Schedule]:
    """`count` operator schedules, each with a few runs of every status."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO claimsched.job_schedule (job_name, schedule, source, owner, active_since)
            SELECT 'job-' || i, CASE WHEN i %% 2 = 0 THEN '@every 10s' ELSE '*/5 * * * *' END,
                   'operator', 'default/job-' || i, now() - interval '2 hours'
            FROM generate_series(1, %(n)s) AS i""", {"n": count})
        conn.execute("""
            INSERT INTO claimsched.job_runs (job_name, fire_time, status, claimed_by, attempt,
                                             orphan_count, error)
            SELECT 'job-' || i, date_trunc('minute', now()) - make_interval(mins => 5 * k),
                   (ARRAY['done', 'failed', 'orphaned', 'running'])[k], 'agent-1', k, k %% 2,
                   CASE WHEN k = 2 THEN 'boom; attempts exhausted' END
            FROM generate_series(1, %(n)s) AS i, generate_series(1, 4) AS k""", {"n": count})
    return {f"job-{i}": Schedule("@every 10s" if i % 2 == 0 else "*/5 * * * *")
            for i in range(1, count + 1)}


def statements_per_refresh(dsn: str, count: int) -> tuple[int, int]:
    schedules = seed(dsn, count)
    store = counting_store(dsn)
    try:
        owned, counter = OwnedSchedules(store), OccurrenceCounter()
        refresh(owned, schedules, counter, 90)  # warm: pool connections, counters
        SENT.clear()
        observed = refresh(owned, schedules, counter, 90)
        return len(SENT), len(observed)
    finally:
        store.pool.close()


def test_status_refresh_statements_do_not_grow_with_the_number_of_schedules(
        server_dsn: str, dsn: str) -> None:
    small, small_jobs = statements_per_refresh(dsn, 10)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE claimsched.job_runs, claimsched.job_schedule")
    large, large_jobs = statements_per_refresh(dsn, 1000)
    assert (small_jobs, large_jobs) == (10, 1000)
    assert small == large == 1, SENT


def test_a_refresh_of_many_schedules_runs_no_cyclic_garbage_collection(dsn: str) -> None:
    """Rows and observations hold no cycles: the collector walking every object of the operator
    while a refresh allocates them was half the CPU of a first refresh (issue 15). It runs once
    when the refresh is done."""
    schedules = seed(dsn, 2000)
    store = counting_store(dsn)
    collections: list[int] = []
    refreshing = threading.get_ident()  # not the pool's threads, which allocate too

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.get_ident() == refreshing:
            collections.append(info["generation"])

    try:
        gc.callbacks.append(count)
        try:
            observed = refresh(OwnedSchedules(store), schedules, OccurrenceCounter(), 90)
        finally:
            gc.callbacks.remove(count)
        assert len(observed) == 2000
        assert len(collections) <= 1, collections  # the one when collection resumes
        assert gc.isenabled()
    finally:
        store.pool.close()
