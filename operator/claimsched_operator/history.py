"""Each job's settled history, counted once: the occurrences with a run in
``(history_start, settled_to]`` (older than a day and than an hour before the job's settled
end), which only a backfill or retention changes, and both move the database's history epoch.
A refresh sends the range it counted before for every job; the statement counts only what
entered and left it since (sql/operator.sql's operator_status), or the whole range when the
epoch moved, the range moved back, or nothing is known (a new job, a started operator)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

# The occurrences with a run in ``(start, end]``: (start, end, how many, the newest). A plain
# tuple: one per job per refresh, cheaper to build than a dataclass.
Settled = tuple[datetime, datetime, int, datetime | None]


class SettledHistory:
    """One database's settled history of every job, as of the last refresh. Not thread-safe:
    one refresh of a database at a time."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self._jobs: dict[str, Settled] = {}
        self._next: dict[str, Settled] = {}
        self._next_epoch: int | None = None

    def known(self, jobs: Iterable[str]) -> dict[str, Any]:
        """The statement's parameters for `jobs` (in this order): the ranges counted before.
        Starts a refresh: the jobs `complete` is given next are all that is kept."""
        names = list(jobs)
        held = [self._jobs.get(job) for job in names]
        self._next, self._next_epoch = {}, None
        return {
            "jobs": names,
            "known_from": [s[0] if s else None for s in held],
            "known_to": [s[1] if s else None for s in held],
            "known_epoch": self.epoch,
        }

    def complete(self, row: dict[str, Any]) -> None:
        """Add to a job's row of the statement its whole history window's figures, settled and
        recent: `seen_history` (occurrences with a run) and `latest_seen` (the newest)."""
        start: datetime = row["history_start"]
        seen: int = row["settled_seen"]
        latest: datetime | None = row["settled_latest"]
        if row["settled_incremental"]:
            _, _, before_seen, before_latest = self._jobs[row["job_name"]]
            seen += before_seen - row["settled_dropped"]
            if latest is None and before_latest is not None and before_latest > start:
                latest = before_latest
        self._next[row["job_name"]] = (start, row["settled_to"], seen, latest)
        self._next_epoch = row["history_epoch"]
        row["seen_history"] = seen + row["seen_recent"]
        row["latest_seen"] = row["latest_recent"] or latest

    def finish(self) -> None:
        """The refresh is over: jobs without a row (gone, not asked for) are forgotten."""
        self._jobs, self.epoch, self._next = self._next, self._next_epoch, {}
