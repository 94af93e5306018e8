"""The database clock's estimate: the sample with the shortest round trip wins, and the local
wall clock plays no part (samples and readings are on the monotonic clock)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from claimsched import clock as clock_module
from claimsched.clock import KEPT, DbClock


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _ahead(clock: DbClock) -> float:
    """How far the estimate is ahead of the monotonic clock, in seconds."""
    return clock.now().timestamp() - time.monotonic()


def test_a_round_trip_stretched_by_a_busy_host_does_not_move_the_estimate() -> None:
    clock = DbClock()
    clock.observe(_at(1000.0 + 2.0), 1000.0, 1000.002)  # 2 ms there and back: +2 s
    clock.observe(_at(1010.0 + 2.0), 1010.0, 1010.080)  # waited 80 ms for a core: +1.96 s
    assert abs(_ahead(clock) - 2.0) < 0.01


def test_the_estimate_follows_a_changed_offset_within_a_few_samples() -> None:
    clock = DbClock()
    clock.observe(_at(100.0), 100.0, 100.001)
    for i in range(KEPT):
        clock.observe(_at(105.0 + i + 5.0), 105.0 + i, 105.0 + i + 0.002)
    assert abs(_ahead(clock) - 5.0) < 0.01
    assert abs(clock.seconds_until(clock.now())) < 0.01


def test_a_step_of_the_wall_clock_does_not_move_the_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NTP, a resumed VM or libfaketime steps the wall clock: what the database's clock reads
    now, as this replica estimates it, stays where it was (a replica 300 s ahead by a stale
    sample skipped due occurrences as missed)."""
    clock = DbClock()
    sent = time.monotonic()
    clock.observe(_at(1_800_000_000.0), sent, sent + 0.001)
    before = clock.now()
    wall = time.time
    monkeypatch.setattr(clock_module.time, "time", lambda: wall() + 300.0)
    assert abs((clock.now() - before).total_seconds()) < 0.05
    assert abs(clock.offset - (before.timestamp() - wall() - 300.0)) < 0.05
