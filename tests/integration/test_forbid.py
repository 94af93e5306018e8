"""concurrencyPolicy Forbid: at most one run of a job in progress, enforced by the database.

In progress: running (even with an expired lease the reaper has not seen yet), orphaned and
awaiting reclaim, or a request being taken — for scheduled, reclaimed, retried, manual and
backfilled runs alike, and for claims that race on other connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from claimsched.db import Store, connect
from claimsched.db.arrays import claim_params
from claimsched.db.queries import call
from claimsched.records import ClaimResult, Completion, Lease
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for

from .support import PRESENCE, due, past, runs, sql


def _schedule(store: Store, name: str = "job", **fields: object) -> None:
    store.schedules.upsert(job_spec(job_name=name, schedule="@every 1s", **fields))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")


def _claim(store: Store, agent: str, fire_time: datetime, latest: bool = True) -> ClaimResult:
    _, (result,) = store.claims.claim(agent, due(store, "job", fire_time, latest=latest), 4)
    return result


def _in_progress(dsn: str, job: str = "job") -> list[tuple[Any, ...]]:
    return sql(
        dsn,
        "SELECT fire_time, status FROM job_runs WHERE job_name = %s "
        "AND status IN ('running', 'orphaned') ORDER BY fire_time",
        [job],
    )


def _expire(dsn: str) -> None:
    sql(dsn, "UPDATE job_runs SET lease_until = now() - interval '1 second' "
             "WHERE status = 'running'")


def _while_held(dsn: str, statement: str, params: dict[str, Any],
                contender: Callable[[], Any]) -> tuple[list[tuple[Any, ...]], Any]:
    """Run `statement` in an open transaction, start `contender` on another connection, let it
    run until it waits for a lock (or finishes), then commit. Returns both answers."""
    answer: list[Any] = []
    with connect(dsn, "claimsched", autocommit=False) as held:
        rows = held.execute(statement, params).fetchall()
        thread = threading.Thread(target=lambda: answer.append(contender()))
        thread.start()
        wait_for(
            lambda: not thread.is_alive() or sql(
                dsn, "SELECT count(*) FROM pg_stat_activity "
                     "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )[0][0] > 0,
            timeout=10,
            what="the contender to wait for the lock or finish",
        )
        held.commit()
    thread.join(10)
    assert not thread.is_alive() and len(answer) == 1
    return rows, answer[0]


def test_two_claims_of_different_occurrences_racing_on_two_connections_let_one_win(
    store: Store,
) -> None:
    """Under READ COMMITTED the second claim's snapshot does not show the first's row: a busy
    check alone lets both win. The database refuses the second one while the first is in
    flight (contended: its replica proposes it again, and then sees the first's run)."""
    _schedule(store)
    first, second = past(3), past(2)
    params = claim_params("a", due(store, "job", first), 4)
    rows, contender = _while_held(
        store.dsn, call("cs_claim_v2"), params, lambda: _claim(store, "b", second)
    )
    assert [row[2] for row in rows] == ["claimed"]
    assert contender.outcome == "contended"
    assert _in_progress(store.dsn) == [(first, "running")]
    assert _claim(store, "b", second).outcome == "skipped"


def _race(dsn: str, job: str, occurrences: list[datetime]) -> list[ClaimResult]:
    """One replica per occurrence, each on its own connection, released at the same instant."""
    stores = [Store(dsn, max_size=1) for _ in occurrences]
    for each in stores:
        each.open()
    start = threading.Barrier(len(stores))
    won: list[ClaimResult] = []

    def replica(mine: Store, fire_time: datetime, index: int) -> None:
        start.wait()
        _, results = mine.claims.claim(f"r{index}", due(mine, job, fire_time, latest=False), 4)
        won.extend(r for r in results if r.outcome == "claimed")

    threads = [
        threading.Thread(target=replica, args=(mine, fire_time, i))
        for i, (mine, fire_time) in enumerate(zip(stores, occurrences, strict=True))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for each in stores:
        each.close()
    return won


def test_many_replicas_claiming_occurrences_of_one_forbid_job_at_once_start_one_run(
    store: Store,
) -> None:
    for round_ in range(4):
        job = f"job-{round_}"
        _schedule(store, job)
        won = _race(store.dsn, job, [past(s) for s in range(1, 9)])
        assert len(won) == 1, won
        assert len(_in_progress(store.dsn, job)) == 1


def test_a_claim_sees_a_run_whose_lease_expired_before_the_reaper_did_as_busy(
    store: Store,
) -> None:
    """(b) The lease ran out and the reaper (every 30 s) has not orphaned the run yet."""
    _schedule(store)
    old, new, newer = past(10), past(5), past(4)
    assert _claim(store, "a", old).outcome == "claimed"
    _expire(store.dsn)
    assert _claim(store, "b", newer).outcome == "skipped"
    assert _claim(store, "b", new, latest=False).outcome == "deferred"
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert taken.fire_time == old and taken.attempt == 2
    assert _in_progress(store.dsn) == [(old, "running")]


def test_an_orphan_awaiting_reclaim_keeps_a_forbid_job_busy(store: Store) -> None:
    _schedule(store)
    old = past(10)
    _claim(store, "a", old)
    _expire(store.dsn)
    assert store.claims.housekeeping("b", ["job"], PRESENCE).orphaned == 1
    assert _claim(store, "b", past(5)).outcome == "skipped"
    assert _in_progress(store.dsn) == [(old, "orphaned")]


def test_an_orphan_is_not_reclaimed_beside_a_newer_running_occurrence(store: Store) -> None:
    """(a) The state older code left behind: an orphan, and a newer occurrence running."""
    _schedule(store)
    old, new = past(10), past(5)
    _claim(store, "a", old)
    _expire(store.dsn)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    sql(store.dsn, "INSERT INTO job_runs (job_name, fire_time, status, claimed_by, lease_until, "
                   "attempt, started_at) "
                   "VALUES ('job', %s, 'running', 'b', now() + interval '1 minute', 1, now())",
        [new])
    assert store.claims.reclaim("c", ["job"], 4) == []
    assert _in_progress(store.dsn) == [(old, "orphaned"), (new, "running")]


def test_of_two_orphans_left_by_older_code_the_oldest_is_reclaimed(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    old, new = past(10), past(5)
    _claim(store, "a", old)
    _claim(store, "a", new)
    sql(store.dsn, "UPDATE job_schedule SET concurrency_policy = 'Forbid'")
    _expire(store.dsn)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert taken.fire_time == old
    assert store.claims.reclaim("c", ["job"], 4) == []


def test_backfilled_manual_and_retried_runs_of_a_forbid_job_run_one_at_a_time(
    store: Store,
) -> None:
    """(c) Requests and retries take the same path as orphans: one in progress at a time."""
    _schedule(store, retry_on_failure=True)
    backfill = [past(30), past(20), past(15)]
    store.listings.request_runs("job", backfill, "backfill")
    (first,) = store.claims.reclaim("a", ["job"], 10)
    assert first.fire_time == backfill[0]
    assert store.claims.reclaim("b", ["job"], 10) == []
    assert _claim(store, "b", past(1)).outcome == "skipped"
    store.claims.complete("a", [Completion(first, "failed", "boom", backoff_seconds=0)])
    (second,) = store.claims.reclaim("b", ["job"], 10)
    assert second.fire_time == backfill[0] and second.attempt == 2  # the due retry, first
    store.listings.request_runs("job", [store.db_now()], "manual")
    assert store.claims.reclaim("c", ["job"], 10) == []
    store.claims.complete("b", [Completion(second, "done")])
    taken: list[Lease] = []
    while len(taken) < 3:
        (lease,) = store.claims.reclaim("c", ["job"], 10)
        assert len(_in_progress(store.dsn)) == 1
        taken.append(lease)
        store.claims.complete("c", [Completion(lease, "done")])
    assert [t.kind for t in taken] == ["backfill", "backfill", "manual"]
    assert [r["status"] for r in runs(store.dsn)].count("done") == 4


def test_a_request_being_taken_makes_a_racing_claim_contended_then_it_sees_it(
    store: Store,
) -> None:
    _schedule(store)
    requested, due_now = past(30), past(2)
    store.listings.request_runs("job", [requested], "backfill")
    params = {"agent_id": "a", "jobs": ["job"], "capacity": 4}
    rows, contender = _while_held(
        store.dsn, call("cs_reclaim_v2"), params, lambda: _claim(store, "b", due_now)
    )
    assert len(rows) == 1
    assert contender.outcome == "contended"
    assert _claim(store, "b", due_now).outcome == "skipped"
    assert _in_progress(store.dsn) == [(requested, "running")]


def test_allow_jobs_take_no_lock(store: Store) -> None:
    """Allow pays nothing for Forbid: a claim of an Allow job does not wait for a lock that a
    Forbid claim of the same job name would take."""
    _schedule(store, concurrency_policy="Allow")
    with connect(store.dsn, "claimsched", autocommit=False) as held:
        held.execute("SELECT 1 FROM job_schedule WHERE job_name = 'job' FOR UPDATE")
        began = time.monotonic()
        assert _claim(store, "b", past(2)).outcome == "claimed"
        assert time.monotonic() - began < 5
        held.rollback()
