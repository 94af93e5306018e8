"""The array literals the claim, heartbeat, completion and release statements take read back as
exactly the values psycopg would have sent element by element; and encoding them stays cheap."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import uuid4

import pytest

from claimsched.db import Store
from claimsched.db.arrays import claim_params, literal
from claimsched.records import Candidate
from claimsched.schedule.specs import job_spec

from .support import due, past, sql

NOW = datetime(2026, 3, 29, 1, 30, 5, 123456, tzinfo=UTC)

CASES: list[tuple[str, list[Any]]] = [
    ("text", ["job-1", "null", "NULL", "a b", 'q"uote', "back\\slash", "{,}", "ü€", "", None]),
    ("text", [None, None]),
    ("text", []),
    ("timestamptz", [NOW, NOW + timedelta(microseconds=1), None,
                     NOW.astimezone(timezone(timedelta(hours=5, minutes=30))),
                     datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
    ("boolean", [True, False, None]),
    ("bigint", [1, -2, 9_007_199_254_740_993, None]),
    ("integer", [0, 7]),
    ("double precision", [0.1, 1e-05, 12345678.5, float("inf"), None]),
    ("uuid", [uuid4(), None, uuid4()]),
]


@pytest.mark.parametrize(("kind", "values"), CASES)
def test_an_array_literal_reads_back_as_the_values_it_was_made_of(
    store: Store, kind: str, values: list[Any]
) -> None:
    (row,) = sql(store.dsn, f"SELECT %s::{kind}[], %s::{kind}[]", [literal(values), values])
    assert row[0] == row[1] == values


def test_a_claim_sent_as_array_literals_claims_what_it_proposed(store: Store) -> None:
    store.schedules.upsert(job_spec(job_name="null", schedule="@every 1s"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    fire_times = [past(3), past(2)]
    candidates = [*due(store, "null", fire_times[0], want="skipped", reason="missed_latest",
                       latest=False),
                  *due(store, "null", fire_times[1])]
    claimed = store.claims.claim("a", candidates, 4)
    assert claimed is not None
    outcomes = [(r.job_name, r.fire_time, r.outcome) for r in claimed[1]]
    assert sorted(outcomes) == [("null", fire_times[0], "skipped"),
                                ("null", fire_times[1], "claimed")]
    (lease,) = [r.lease for r in claimed[1] if r.lease is not None]
    assert (lease.job_name, lease.fire_time, lease.attempt) == ("null", fire_times[1], 1)
    assert isinstance(lease.lease_seconds, float)


@contextmanager
def python_calls() -> Iterator[list[int]]:
    """Counts the Python-level function calls made inside the block (calls into C not counted)."""
    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def test_proposing_many_occurrences_costs_python_calls_per_array_not_per_occurrence(
    store: Store,
) -> None:
    since = past(3600)
    small = [Candidate(f"job{i:05d}", NOW, since) for i in range(10)]
    large = [Candidate(f"job{i:05d}", NOW, since) for i in range(5000)]
    with store.connection() as conn:
        def send(candidates: list[Candidate]) -> int:
            with python_calls() as calls:
                conn.execute("SELECT cardinality(%(jobs)s::text[]), "
                             "cardinality(%(fire_times)s::timestamptz[]), "
                             "cardinality(%(since)s::timestamptz[]), "
                             "cardinality(%(latest)s::boolean[]), "
                             "cardinality(%(reasons)s::text[])",
                             claim_params("a", candidates, 4))
            return calls[0]

        send(small)  # warm: the statement is prepared, its dumpers are chosen
        assert send(large) < send(small) + 100
