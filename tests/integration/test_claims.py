"""The claim statement on a real Postgres: one winner per occurrence, the database decides."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import psycopg
import pytest

from claimsched.cli import main
from claimsched.db import SessionOptions, Store
from claimsched.db.arrays import claim_params
from claimsched.db.queries import call
from claimsched.schedule.specs import job_spec

from .support import PRESENCE, due, past, runs, sql


def _schedule(store: Store, name: str = "job", **fields: object) -> None:
    store.schedules.upsert(job_spec(job_name=name, schedule="@every 1s", **fields))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")


def test_racing_replicas_produce_one_row_per_occurrence(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    occurrences = [past(s) for s in range(1, 41)]
    won: list[int] = []
    lock = threading.Lock()

    def replica(index: int) -> None:
        mine = Store(store.dsn)
        mine.open()
        try:
            _, results = mine.claims.claim(f"r{index}", due(store, "job", *occurrences), 100)
            with lock:
                won.extend(r.lease.id for r in results if r.lease)
        finally:
            mine.close()

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = runs(store.dsn, "job")
    assert len(rows) == len(occurrences) == len(won) == len(set(won))
    assert {r["fire_time"] for r in rows} == set(occurrences)


@pytest.fixture
def hurried(store: Store) -> Iterator[Store]:
    """A store whose statements give up after 3 s: one that waits on a lock fails the test."""
    s = Store(store.dsn, options=SessionOptions(statement_timeout=3, lock_timeout=3))
    s.open()
    yield s
    s.close()


@contextmanager
def in_flight(store: Store, job: str, fire_time: datetime) -> Iterator[psycopg.Connection]:
    """Another replica's claim of `job` at `fire_time`, left uncommitted."""
    with psycopg.connect(store.dsn) as racing:
        racing.execute("SET search_path = claimsched, public")
        racing.execute(call("cs_claim_v2"), claim_params("racing", due(store, job, fire_time), 4))
        yield racing


@pytest.mark.parametrize("policy", ["Allow", "Forbid", "Replace"])
def test_a_claim_passes_over_an_occurrence_that_a_claim_in_flight_is_inserting(
    store: Store, hurried: Store, policy: str
) -> None:
    _schedule(store, "a", concurrency_policy=policy)
    _schedule(store, "b", concurrency_policy=policy)
    first = past(1)
    with in_flight(store, "a", first) as racing:
        both = due(store, "a", first) + due(store, "b", first)
        _, results = hurried.claims.claim("hurried", both, 4)
        assert [r.outcome for r in results] == ["contended", "claimed"]
        racing.rollback()
    _, results = hurried.claims.claim("hurried", due(store, "a", first), 4)
    assert [r.outcome for r in results] == ["claimed"]
    assert {(r["job_name"], r["claimed_by"]) for r in runs(store.dsn)} == {
        ("a", "hurried"), ("b", "hurried")}


def test_a_forbid_job_that_a_claim_in_flight_holds_is_contended_at_any_occurrence(
    store: Store, hurried: Store
) -> None:
    _schedule(store)  # Forbid
    first, second = past(2), past(1)
    with in_flight(store, "job", first) as racing:
        _, results = hurried.claims.claim("hurried", due(store, "job", second), 4)
        assert [r.outcome for r in results] == ["contended"]
        racing.commit()
    _, results = hurried.claims.claim("hurried", due(store, "job", second), 4)
    assert [r.outcome for r in results] == ["skipped"]  # busy: the racing run is running
    assert [(r["claimed_by"], r["status"]) for r in runs(store.dsn, "job")] == [
        ("racing", "running"), ("hurried", "skipped")]


def test_claims_are_limited_to_free_slots(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    _, results = store.claims.claim("a", due(store, "job", *map(past, range(1, 6))), 2)
    assert [r.outcome for r in results].count("claimed") == 2
    assert [r.outcome for r in results].count("no_capacity") == 3


def test_a_future_occurrence_is_not_due_by_the_database_clock(store: Store) -> None:
    _schedule(store)
    future = past(-120)
    _, results = store.claims.claim("fast-clock", due(store, "job", future), 4)
    assert [r.outcome for r in results] == ["not_due"]
    assert runs(store.dsn) == []


def test_disabled_or_not_yet_active_schedules_are_never_claimed(store: Store) -> None:
    _schedule(store, "off", enabled=False)
    store.schedules.upsert(job_spec(job_name="fresh", schedule="@every 1s"))
    both = [*due(store, "off", past(5)), *due(store, "fresh", past(5))]
    _, results = store.claims.claim("a", both, 4)
    assert [r.outcome for r in results] == ["inactive", "inactive"]


def test_forbid_skips_the_latest_overlapping_occurrence_and_defers_older_ones(store: Store) -> None:
    _schedule(store)
    _, first = store.claims.claim("a", due(store, "job", past(10)), 4)
    assert first[0].outcome == "claimed"
    _, second = store.claims.claim(
        "b", [*due(store, "job", past(9), latest=False), *due(store, "job", past(8))], 4
    )
    assert [r.outcome for r in second] == ["deferred", "skipped"]
    skipped = [r for r in runs(store.dsn) if r["status"] == "skipped"]
    assert len(skipped) == 1 and "Forbid" in skipped[0]["error"]


def test_allow_runs_overlapping_occurrences_side_by_side(store: Store) -> None:
    _schedule(store, concurrency_policy="Allow")
    store.claims.claim("a", due(store, "job", past(10)), 4)
    _, second = store.claims.claim("b", due(store, "job", past(9)), 4)
    assert second[0].outcome == "claimed"
    assert [r["status"] for r in runs(store.dsn)] == ["running", "running"]


def test_replace_fences_out_the_running_occurrence(store: Store) -> None:
    _schedule(store, concurrency_policy="Replace")
    _, first = store.claims.claim("a", due(store, "job", past(10)), 4)
    store.claims.claim("b", due(store, "job", past(9)), 4)
    old, new = runs(store.dsn)
    assert old["status"] == "failed" and "Replace" in old["error"]
    assert new["status"] == "running"
    lease = first[0].lease
    assert lease is not None and store.claims.heartbeat("a", [lease]) == set()


def test_skipped_candidates_are_recorded_with_their_reason(store: Store) -> None:
    _schedule(store)
    skipped = due(store, "job", past(3), want="skipped", reason="missed; policy Latest",
                  latest=False)
    store.claims.claim("a", skipped, 0)
    (row,) = runs(store.dsn)
    assert row["status"] == "skipped" and row["error"] == "missed; policy Latest"


def test_the_claim_returns_the_database_clock(store: Store) -> None:
    _schedule(store)
    db_now, results = store.claims.claim("a", [], 4)
    assert results == []
    assert abs(db_now - store.db_now()) < timedelta(seconds=5)


def test_of_a_forbid_jobs_free_occurrences_only_the_oldest_runs(store: Store) -> None:
    _schedule(store, catch_up_policy="All")
    times = [past(3), past(2), past(1)]
    _, results = store.claims.claim(
        "a", [*due(store, "job", *times[:-1], latest=False), *due(store, "job", times[-1])], 10
    )
    assert [r.outcome for r in results] == ["claimed", "deferred", "deferred"]


def test_a_stopping_agent_claims_and_reclaims_nothing_once_the_database_answers(
    store: Store,
) -> None:
    """`proceed` is asked with a connection in hand: an agent that began to stop while it
    waited for the database (say, during an outage) sends no claim when it comes back."""
    _schedule(store, concurrency_policy="Allow")
    asked: list[bool] = []

    def stopping() -> bool:
        asked.append(True)
        return False

    assert store.claims.claim("a", due(store, "job", past(3)), 4, stopping) is None
    store.listings.request_runs("job", [past(2)], "manual")
    assert store.claims.reclaim("a", ["job"], 4, stopping) == []
    assert len(asked) == 2
    assert [r["status"] for r in runs(store.dsn, "job")] == ["pending"]


def test_a_candidate_computed_from_a_schedule_that_changed_since_is_refused(store: Store) -> None:
    """Issue 16, item 6: a replica that had not yet re-read a changed schedule claimed an instant
    that is no occurrence of the schedule as it is now."""
    _schedule(store)
    (stale,) = due(store, "job", past(1))  # computed from "@every 1s" as read before the change
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 7s"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'"
                   " WHERE job_name = 'job'")  # a change long ago, still unknown to the replica
    _, results = store.claims.claim("a", [stale], 4)
    assert [r.outcome for r in results] == ["stale"]
    assert runs(store.dsn) == []
    _, results = store.claims.claim("a", due(store, "job", stale.fire_time), 4)
    assert [r.outcome for r in results] == ["claimed"]


def test_claimsched_agents_warns_when_live_agents_use_different_time_zone_databases(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.claims.housekeeping("a", ["job"], {**PRESENCE, "tzdata": "2025b"})
    assert main(["agents", "--dsn", store.dsn, "-o", "wide"]) == 0
    assert "2025b" in capsys.readouterr().out
    store.claims.housekeeping("b", ["job"], {**PRESENCE, "tzdata": "2026a (the tzdata package)"})
    assert main(["agents", "--dsn", store.dsn, "--json"]) == 0
    captured = capsys.readouterr()
    assert {a["tzdata"] for a in json.loads(captured.out)} == {
        "2025b", "2026a (the tzdata package)"}
    assert "different time zone databases (2025b, 2026a (the tzdata package))" in captured.err
