"""The database's clock, as seen from this replica: local time plus a measured offset."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class DbClock:
    """Estimates the database's `now()` from the local clock and the last measured offset."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    @property
    def offset(self) -> float:
        """Seconds to add to the local clock to get the database's."""
        return self._offset

    def observe(self, db_now: datetime, sent: float, received: float) -> None:
        """Record a database timestamp taken between local times `sent` and `received`."""
        with self._lock:
            self._offset = db_now.timestamp() - (sent + received) / 2

    def now(self) -> datetime:
        return datetime.fromtimestamp(time.time() + self._offset, UTC)

    def seconds_until(self, moment: datetime) -> float:
        return moment.timestamp() - (time.time() + self._offset)
