"""The database's clock, as seen from this replica: local time plus a measured offset."""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import UTC, datetime

KEPT = 8  # samples the estimate chooses from ...
KEPT_SECONDS = 60.0  # ... taken at most this long ago (a clock stepped since counts soon)


class DbClock:
    """Estimates the database's `now()` from the local clock and a measured offset.

    A sample (a database timestamp read between local `sent` and `received`) is wrong by at
    most half its round trip. On a busy host a round trip stretches by tens of ms (16 replicas
    on 2 cores), and the last sample alone put the database that far ahead now and then: the
    replica proposed occurrences before the database's now() had come to them ('not_due', and
    a second claim 10 ms later). As NTP does, the estimate is the offset of the sample with the
    shortest round trip of the last KEPT (none older than KEPT_SECONDS but the newest)."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=KEPT)  # rtt, offset, at
        self._lock = threading.Lock()

    @property
    def offset(self) -> float:
        """Seconds to add to the local clock to get the database's."""
        return self._offset

    def observe(self, db_now: datetime, sent: float, received: float) -> None:
        """Record a database timestamp taken between local times `sent` and `received`."""
        at = time.monotonic()
        with self._lock:
            samples = self._samples
            while samples and samples[0][2] < at - KEPT_SECONDS:
                samples.popleft()
            samples.append((received - sent, db_now.timestamp() - (sent + received) / 2, at))
            self._offset = min(samples)[1]

    def now(self) -> datetime:
        return datetime.fromtimestamp(time.time() + self._offset, UTC)

    def seconds_until(self, moment: datetime) -> float:
        return moment.timestamp() - (time.time() + self._offset)
