"""Fenced out is not failed: a run whose handler ended because its lease was lost goes back for
its next attempt, and the occurrence keeps the superseded attempts in job_attempts."""

from __future__ import annotations

import psycopg

from claimsched.db import Store
from claimsched.records import Completion, Lease
from claimsched.schedule.specs import job_spec

from .support import PRESENCE, due, past, runs, sql

LOST = "LeaseLost: lease lost for job (attempt 1): effect 'after' refused"


def _claimed(store: Store, agent: str = "a", **fields: object) -> Lease:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s", **fields))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    _, results = store.claims.claim(agent, due(store, "job", past(5)), 4)
    assert results[0].lease is not None
    return results[0].lease


def _expire(store: Store) -> None:
    sql(store.dsn, "UPDATE job_runs SET lease_until = now() - interval '1 second'"
                   " WHERE status = 'running'")


def _history(store: Store) -> list[tuple[object, ...]]:
    return sql(store.dsn, "SELECT attempt, claimed_by, outcome, error FROM job_attempts"
                          " ORDER BY attempt")


def test_a_fenced_out_run_goes_back_for_its_next_attempt_not_failed(store: Store) -> None:
    lease = _claimed(store)
    _expire(store)  # paused past its lease; nobody reaped it meanwhile
    given_back = Completion(lease, "fenced_out", LOST)
    assert store.claims.complete("a", [given_back]) == {lease.id: None}
    (row,) = runs(store.dsn)
    assert (row["status"], row["attempt"], row["orphan_count"]) == ("orphaned", 1, 1)
    assert row["finished_at"] is None and row["retry_at"] is None
    assert row["error"] == f"fenced out (claimed by a, attempt 1): {LOST}"
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert (taken.id, taken.attempt) == (lease.id, 2)
    assert _history(store) == [(1, "a", "fenced_out", row["error"])]
    assert store.claims.complete("b", [Completion(taken, "done")]) == {taken.id: None}
    assert runs(store.dsn)[0]["status"] == "done"


def test_a_run_given_back_while_its_lease_still_held_is_claimable_at_once(store: Store) -> None:
    """The local watchdog lost the run first (a renewal it could not confirm): giving it back
    ends the lease now, rather than leaving the next attempt to wait for it to run out."""
    lease = _claimed(store, lease_seconds=60, heartbeat_seconds=10)
    assert store.claims.complete("a", [Completion(lease, "fenced_out", LOST)]) == {lease.id: None}
    (row,) = runs(store.dsn)
    assert row["status"] == "orphaned"
    assert sql(store.dsn, "SELECT lease_until <= now() FROM job_runs") == [(True,)]
    assert [t.attempt for t in store.claims.reclaim("b", ["job"], 4)] == [2]


def test_a_run_the_reaper_orphaned_is_given_back_as_it_is(store: Store) -> None:
    lease = _claimed(store)
    _expire(store)
    assert store.claims.housekeeping("b", ["job"], PRESENCE).orphaned == 1
    assert store.claims.complete("a", [Completion(lease, "fenced_out", LOST)]) == {lease.id: None}
    (row,) = runs(store.dsn)
    assert (row["status"], row["orphan_count"]) == ("orphaned", 1)  # orphaned once, not twice
    assert row["error"].startswith("fenced out (claimed by a, attempt 1)")


def test_a_fenced_out_last_attempt_fails_for_good_saying_so(store: Store) -> None:
    lease = _claimed(store, max_attempts=1, retry_on_failure=True)
    _expire(store)
    assert store.claims.complete("a", [Completion(lease, "fenced_out", LOST)]) == {lease.id: None}
    (row,) = runs(store.dsn)
    assert (row["status"], row["retry_at"]) == ("failed", None)
    assert row["finished_at"] is not None
    assert row["error"].endswith("; attempts exhausted")
    assert store.claims.reclaim("b", ["job"], 4) == []


def test_a_fenced_out_attempt_that_was_already_taken_over_changes_nothing(store: Store) -> None:
    lease = _claimed(store)
    _expire(store)
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (_taken,) = store.claims.reclaim("b", ["job"], 4)
    assert store.claims.complete("a", [Completion(lease, "fenced_out", LOST)]) == {}
    (row,) = runs(store.dsn)
    assert (row["status"], row["claimed_by"], row["attempt"]) == ("running", "b", 2)
    assert _history(store) == [
        (1, "a", "orphaned", "lease expired (claimed by a, attempt 1)")]


def test_giving_a_run_back_tells_the_agents_it_wants_an_owner(store: Store) -> None:
    lease = _claimed(store)
    with psycopg.connect(store.dsn, autocommit=True) as listener:
        listener.execute("LISTEN claimsched_runs")
        store.claims.complete("a", [Completion(lease, "fenced_out", LOST)])
        heard = [n.channel for n in listener.notifies(timeout=5, stop_after=1)]
    assert heard == ["claimsched_runs"]


def test_each_superseded_attempt_is_kept_with_who_held_it_and_how_it_ended(store: Store) -> None:
    lease = _claimed(store, max_attempts=4, retry_on_failure=True)
    _expire(store)
    store.claims.housekeeping("b", ["job"], PRESENCE)  # attempt 1: orphaned by the reaper
    (second,) = store.claims.reclaim("b", ["job"], 4)
    store.claims.complete("b", [Completion(second, "fenced_out", LOST)])  # attempt 2: fenced out
    (third,) = store.claims.reclaim("c", ["job"], 4)
    store.claims.complete("c", [Completion(third, "failed", "ValueError: boom", 0.0)])
    (fourth,) = store.claims.reclaim("a", ["job"], 4)  # attempt 3 failed, retried at once
    store.claims.complete("a", [Completion(fourth, "done")])
    assert [(a, by, how) for a, by, how, _ in _history(store)] == [
        (1, "a", "orphaned"), (2, "b", "fenced_out"), (3, "c", "failed")]
    ended = sql(store.dsn, "SELECT bool_and(ended_at IS NOT NULL AND started_at IS NOT NULL)"
                           " FROM job_attempts")
    assert ended == [(True,)]
    (listed,) = store.listings.runs("job")
    assert [a["outcome"] for a in listed.superseded] == ["orphaned", "fenced_out", "failed"]
    assert (listed.status, listed.attempt, lease.attempt) == ("done", 4, 1)


def test_a_first_attempt_that_is_done_writes_no_history(store: Store) -> None:
    lease = _claimed(store)
    store.claims.complete("a", [Completion(lease, "done")])
    assert _history(store) == []
