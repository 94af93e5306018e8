"""The database clock's estimate: the sample with the shortest round trip wins."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from claimsched.clock import KEPT, DbClock


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def test_a_round_trip_stretched_by_a_busy_host_does_not_move_the_estimate() -> None:
    clock = DbClock()
    clock.observe(_at(1000.0 + 2.0), 1000.0, 1000.002)  # 2 ms there and back: +2 s
    clock.observe(_at(2000.0 + 2.0), 2000.0, 2000.080)  # waited 80 ms for a core: +1.96 s
    assert abs(clock.offset - 2.0) < 0.0015


def test_the_estimate_follows_a_changed_offset_within_a_few_samples() -> None:
    clock = DbClock()
    clock.observe(_at(100.0), 100.0, 100.001)
    for i in range(KEPT):
        clock.observe(_at(200.0 + i + 5.0), 200.0 + i, 200.0 + i + 0.002)
    assert abs(clock.offset - 5.0) < 0.002
    assert abs(clock.seconds_until(clock.now()) ) < 0.01
    assert abs((clock.now() - _at(time.time() + 5.0)).total_seconds()) < 0.01
