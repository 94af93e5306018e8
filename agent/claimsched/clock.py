"""The database's clock, as seen from this replica: its monotonic clock plus a measured
offset. The local wall clock plays no part: a replica whose clock is stepped (NTP, a VM
resumed, libfaketime) goes on reading the database's time right."""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import UTC, datetime

KEPT = 8  # samples the estimate chooses from ...
KEPT_SECONDS = 60.0  # ... taken at most this long ago (a drift since counts soon)


class DbClock:
    """Estimates the database's `now()` from the local monotonic clock and a measured offset.

    A sample (a database timestamp read between local monotonic instants `sent` and
    `received`) is wrong by at most half its round trip. On a busy host a round trip stretches
    by tens of ms, so, as NTP does, the estimate is the offset of the sample with the shortest
    round trip of the last KEPT (none older than KEPT_SECONDS but the newest). Offsets are to
    the monotonic clock, which never steps: a sample from before a step of the wall clock
    stays right."""

    def __init__(self) -> None:
        self._offset = time.time() - time.monotonic()  # until the first sample: the wall clock
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=KEPT)  # rtt, offset, at
        self._lock = threading.Lock()

    @property
    def offset(self) -> float:
        """Seconds to add to the local wall clock to get the database's, now."""
        return time.monotonic() + self._offset - time.time()

    def observe(self, db_now: datetime, sent: float, received: float) -> None:
        """Record a database timestamp taken between monotonic instants `sent` and
        `received` (time.monotonic())."""
        with self._lock:
            samples = self._samples
            while samples and samples[0][2] < received - KEPT_SECONDS:
                samples.popleft()
            samples.append((received - sent, db_now.timestamp() - (sent + received) / 2,
                            received))
            self._offset = min(samples)[1]

    def now(self) -> datetime:
        return datetime.fromtimestamp(time.monotonic() + self._offset, UTC)

    def seconds_until(self, moment: datetime) -> float:
        return moment.timestamp() - (time.monotonic() + self._offset)
