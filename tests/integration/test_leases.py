"""Leases, fencing, the reaper, reclaims and effect receipts on a real Postgres."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from claimsched import DatabaseError, LeaseLost
from claimsched.db import Store
from claimsched.records import Completion, Lease
from claimsched.run.effects import Effects
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for

from .support import PRESENCE, due, past, runs, sql


def _claimed(store: Store, agent: str = "a", ago: float = 5, **fields: object) -> Lease:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s", **fields))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    _, results = store.claims.claim(agent, due(store, "job", past(ago)), 4)
    assert results[0].lease is not None
    return results[0].lease


def _effects(store: Store, agent: str, lease: Lease) -> Effects:
    """The receipts of `agent`'s run under `lease`, as its handler's `run.effect` uses them."""
    return Effects(store.receipts, agent, lease)


def _expire(store: Store) -> None:
    sql(
        store.dsn,
        "UPDATE job_runs SET lease_until = now() - interval '1 second' WHERE status = 'running'",
    )


def test_heartbeat_renews_owned_leases_in_one_statement(store: Store) -> None:
    lease = _claimed(store)
    before = runs(store.dsn)[0]["lease_until"]
    assert store.claims.heartbeat("a", [lease]) == {lease.id}
    assert runs(store.dsn)[0]["lease_until"] >= before


def test_an_expired_lease_becomes_an_orphan_and_is_reclaimed_with_the_next_attempt(
    store: Store,
) -> None:
    lease = _claimed(store)
    _expire(store)
    found = store.claims.housekeeping("b", ["job"], PRESENCE)
    assert found.orphaned == 1 and found.claimable
    (row,) = runs(store.dsn)
    assert row["status"] == "orphaned" and row["orphan_count"] == 1
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert taken.id == lease.id and taken.attempt == 2
    assert store.claims.heartbeat("a", [lease]) == set()


def test_a_paused_replica_cannot_complete_a_reclaimed_run(store: Store) -> None:
    lease = _claimed(store)
    _expire(store)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert store.claims.complete("a", [Completion(lease, "done")]) == {}
    assert store.claims.complete("b", [Completion(taken, "done")]) == {taken.id: None}
    (row,) = runs(store.dsn)
    assert (row["status"], row["claimed_by"], row["attempt"]) == ("done", "b", 2)


def _lease_ran_out(store: Store) -> None:
    wait_for(
        lambda: sql(store.dsn, "SELECT bool_and(lease_until < now()) FROM job_runs")[0][0],
        timeout=10,
        what="the lease to run out by the database clock",
    )


def test_a_finished_run_is_recorded_after_its_lease_ran_out_while_nobody_took_it(
    store: Store,
) -> None:
    """An outage longer than the rest of the lease: the handler finished meanwhile. Owner and
    attempt fence the completion; the lease does not have to be alive."""
    lease = _claimed(store, lease_seconds=1, heartbeat_seconds=1)
    _lease_ran_out(store)
    assert store.claims.complete("a", [Completion(lease, "done")]) == {lease.id: None}
    (row,) = runs(store.dsn)
    assert (row["status"], row["claimed_by"], row["attempt"]) == ("done", "a", 1)
    assert store.claims.reclaim("b", ["job"], 4) == []


def test_a_finished_run_is_recorded_after_the_reaper_orphaned_it_but_before_a_reclaim(
    store: Store,
) -> None:
    lease = _claimed(store, lease_seconds=1, heartbeat_seconds=1)
    _lease_ran_out(store)
    assert store.claims.housekeeping("b", ["job"], PRESENCE).orphaned == 1
    assert store.claims.complete("a", [Completion(lease, "done")]) == {lease.id: None}
    assert runs(store.dsn)[0]["status"] == "done"
    assert store.claims.reclaim("b", ["job"], 4) == []


def test_a_late_completion_is_refused_once_another_agent_reclaimed_the_run(store: Store) -> None:
    lease = _claimed(store, lease_seconds=1, heartbeat_seconds=1)
    _lease_ran_out(store)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert store.claims.complete("a", [Completion(lease, "done")]) == {}
    (row,) = runs(store.dsn)
    assert (row["status"], row["claimed_by"], row["attempt"]) == ("running", "b", 2)
    assert store.claims.complete("b", [Completion(taken, "done")]) == {taken.id: None}


def test_a_run_failed_past_max_runtime_stays_failed_when_its_handler_finishes_late(
    store: Store,
) -> None:
    lease = _claimed(store, max_runtime_seconds=1)
    sql(store.dsn, "UPDATE job_runs SET started_at = now() - interval '5 seconds'")
    assert store.claims.housekeeping("b", ["job"], PRESENCE).overdue == 1
    assert store.claims.complete("a", [Completion(lease, "done")]) == {}
    assert runs(store.dsn)[0]["status"] == "failed"


def test_an_expired_lease_refuses_effects_even_before_the_reaper_runs(store: Store) -> None:
    lease = _claimed(store)
    _expire(store)
    with pytest.raises(LeaseLost):
        _effects(store, "a", lease).record("mail:1")
    assert sql(store.dsn, "SELECT count(*) FROM job_effects") == [(0,)]


def test_an_effect_is_recorded_once_per_occurrence_across_attempts(store: Store) -> None:
    lease = _claimed(store)
    assert _effects(store, "a", lease).record("mail:1") is True
    assert _effects(store, "a", lease).record("mail:1") is False
    _expire(store)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert _effects(store, "b", taken).record("mail:1") is False
    assert _effects(store, "b", taken).record("mail:2") is True


def test_an_effect_joins_the_callers_transaction(store: Store) -> None:
    lease = _claimed(store)
    with psycopg.connect(store.dsn) as conn:
        conn.execute("CREATE TABLE public.sent (id text)")
        conn.commit()
        conn.execute("INSERT INTO public.sent VALUES ('x')")
        assert _effects(store, "a", lease).record("sent:x", conn=conn) is True
        # the app's session is its own even inside: its search_path was never changed, while
        # its commit waits as ours do (the test server runs with synchronous_commit off) and
        # the server ends it if it idles past the lease (it holds the run's fencing token)
        assert conn.execute("SHOW search_path").fetchone() == ('"$user", public',)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert conn.execute(
            "SELECT setting::int FROM pg_settings"
            " WHERE name = 'idle_in_transaction_session_timeout'"
        ).fetchone() == (int(lease.lease_seconds * 1000),)
        conn.rollback()
        assert conn.execute("SHOW search_path").fetchone() == ('"$user", public',)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    assert sql(store.dsn, "SELECT count(*) FROM job_effects") == [(0,)]
    with psycopg.connect(store.dsn) as conn:
        conn.execute("INSERT INTO public.sent VALUES ('x')")
        assert _effects(store, "a", lease).record("sent:x", conn=conn) is True
    assert sql(store.dsn, "SELECT count(*) FROM job_effects") == [(1,)]
    assert sql(store.dsn, "SELECT count(*) FROM public.sent") == [(1,)]


def test_once_commits_the_receipt_only_when_the_block_succeeds(store: Store) -> None:
    lease = _claimed(store)
    with pytest.raises(RuntimeError), _effects(store, "a", lease).once("k") as first:
        assert first
        raise RuntimeError("the side effect failed")
    with _effects(store, "a", lease).once("k") as first:
        assert first
    with _effects(store, "a", lease).once("k") as first:
        assert not first


def test_orphans_out_of_attempts_fail_for_good(store: Store) -> None:
    _claimed(store, max_attempts=1)
    _expire(store)
    found = store.claims.housekeeping("b", ["job"], PRESENCE)
    assert (found.orphaned, found.exhausted, found.claimable) == (0, 1, False)
    (row,) = runs(store.dsn)
    assert row["status"] == "failed" and "attempts exhausted" in row["error"]
    assert store.claims.reclaim("b", ["job"], 4) == []


def test_a_failure_is_retried_after_backoff_while_attempts_remain(store: Store) -> None:
    lease = _claimed(store, retry_on_failure=True, max_attempts=2)
    recorded = store.claims.complete("a", [Completion(lease, "failed", "boom", backoff_seconds=0)])
    assert recorded[lease.id] is not None
    (retry,) = store.claims.reclaim("b", ["job"], 4)
    assert retry.attempt == 2
    again = Completion(retry, "failed", "boom again", 0)
    assert store.claims.complete("b", [again]) == {retry.id: None}
    assert store.claims.reclaim("b", ["job"], 4) == []
    assert runs(store.dsn)[0]["status"] == "failed"


def test_a_run_past_max_runtime_is_failed_and_fenced_out(store: Store) -> None:
    lease = _claimed(store, max_runtime_seconds=1)
    sql(store.dsn, "UPDATE job_runs SET started_at = now() - interval '5 seconds'")
    found = store.claims.housekeeping("b", ["job"], PRESENCE)
    assert found.overdue == 1
    assert "max_runtime" in runs(store.dsn)[0]["error"]
    assert store.claims.heartbeat("a", [lease]) == set()


def test_released_runs_are_orphaned_at_once_for_another_replica(store: Store) -> None:
    lease = _claimed(store)
    assert store.claims.release("a", [lease]) == 1
    assert store.claims.housekeeping("a", ["job"], PRESENCE).orphaned == 1
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert taken.attempt == 2


def test_a_hand_back_that_loses_a_deadlock_is_retried(store: Store) -> None:
    """Found by the chaos soak (--lapse-partitions): a stopping agent's hand-back lost a deadlock
    to another statement updating the same runs and gave up, leaving them to their leases."""
    store.schedules.upsert(
        job_spec(job_name="job", schedule="@every 1s", concurrency_policy="Allow")
    )
    store.listings.request_runs("job", [past(30), past(20)], "manual")
    first, second = sorted(store.claims.reclaim("a", ["job"], 10), key=lambda lease: lease.id)
    outcome: dict[str, object] = {}

    def hand_back() -> None:
        try:
            outcome["released"] = store.claims.release("a", [first, second])
        except DatabaseError as exc:
            outcome["released"] = exc

    with psycopg.connect(store.dsn) as other:  # e.g. a reaper, taking the same rows the other way
        other.execute("SELECT 1 FROM claimsched.job_runs WHERE id = %s FOR UPDATE", [second.id])
        releasing = threading.Thread(target=hand_back)
        releasing.start()  # takes the first run, then waits for the second
        wait_for(lambda: _waiting_on_locks(store.dsn) == 1, what="the hand-back to wait")
        with pytest.raises(psycopg.errors.LockNotAvailable):  # the hand-back holds the first
            sql(store.dsn, "SELECT 1 FROM job_runs WHERE id = %s FOR UPDATE NOWAIT", [first.id])
        # a deadlock: the hand-back, waiting longest, is the one Postgres rolls back
        other.execute("SELECT 1 FROM claimsched.job_runs WHERE id = %s FOR UPDATE", [first.id])
    releasing.join(10)
    assert outcome["released"] == 2, outcome
    assert all(r["lease_until"] < r["started_at"] + _LEASE for r in runs(store.dsn))


_LEASE = timedelta(seconds=60)


def _waiting_on_locks(dsn: str) -> int:
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    return int(sql(dsn, waiting)[0][0])


def test_a_requested_occurrence_does_not_start_before_its_fire_time(store: Store) -> None:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s"))
    (soon,) = sql(store.dsn, "SELECT date_trunc('second', now()) + interval '3 seconds'")[0]
    assert store.listings.request_runs("job", [soon], "backfill") == [soon]
    assert store.claims.reclaim("a", ["job"], 4) == []
    assert not store.claims.housekeeping("a", ["job"], PRESENCE).claimable
    (taken,) = wait_for(lambda: store.claims.reclaim("a", ["job"], 4), timeout=10,
                        what="the fire time")
    assert taken.fire_time == soon and taken.started_at >= soon


def test_trigger_and_backfill_requests_run_once(store: Store) -> None:
    store.schedules.upsert(
        job_spec(job_name="job", schedule="@every 1s", concurrency_policy="Allow")
    )
    times = [past(30), past(20)]
    assert store.listings.request_runs("job", times, "backfill") == times
    assert store.listings.request_runs("job", times, "backfill") == []
    taken = store.claims.reclaim("a", ["job"], 10)
    assert sorted(t.fire_time for t in taken) == times
    assert all(t.attempt == 1 and t.kind == "backfill" for t in taken)
    assert store.claims.reclaim("b", ["job"], 10) == []


def test_a_run_whose_receipt_is_being_written_is_not_reclaimed_until_it_commits(
    store: Store,
) -> None:
    """Issue 16, item 3a: attempt 1 froze inside once(); its lease ran out and the reaper
    orphaned it. Attempt 2 must not take the occurrence while attempt 1's receipt can still
    commit (it did, after attempt 2 had started: a fenced-out receipt committed)."""
    lease = _claimed(store)
    with _effects(store, "a", lease).once("mail:1") as first:
        assert first
        _expire(store)
        store.claims.housekeeping("b", ["job"], PRESENCE)
        assert store.claims.reclaim("b", ["job"], 4) == []   # the receipt holds the fencing token
    (taken,) = store.claims.reclaim("b", ["job"], 4)          # committed: now it may be taken over
    assert taken.attempt == 2
    assert _effects(store, "b", taken).record("mail:1") is False
    assert sql(store.dsn, "SELECT attempt FROM job_effects") == [(1,)]


def test_a_frozen_receipt_is_ended_by_the_server_after_a_lease(store: Store) -> None:
    """A replica frozen inside once() holds the fencing token: the server ends its
    transaction after a lease, the receipt is not written and the run can be taken over."""
    lease = _claimed(store, lease_seconds=3, heartbeat_seconds=1)
    with pytest.raises(DatabaseError), _effects(store, "a", lease).once("mail:1"):
        _expire(store)
        store.claims.housekeeping("b", ["job"], PRESENCE)
        wait_for(lambda: store.claims.reclaim("b", ["job"], 4), "the frozen receipt to be ended",
                 timeout=10)
    assert sql(store.dsn, "SELECT count(*) FROM job_effects") == [(0,)]
    assert sql(store.dsn, "SELECT attempt, claimed_by FROM job_runs") == [(2, "b")]


def test_a_receipt_in_a_repeatable_read_transaction_is_refused_once_the_run_was_reclaimed(
    store: Store,
) -> None:
    """Issue 16, item 3b: the fence read the caller's snapshot and let a fenced attempt in."""
    lease = _claimed(store)
    with psycopg.connect(store.dsn) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM claimsched.job_runs")  # the snapshot is taken
        _expire(store)
        store.claims.housekeeping("b", ["job"], PRESENCE)
        (taken,) = store.claims.reclaim("b", ["job"], 4)
        assert taken.attempt == 2
        with pytest.raises(LeaseLost):
            _effects(store, "a", lease).record("mail:1", conn=conn)
        conn.rollback()
    assert _effects(store, "b", taken).record("mail:1") is True
