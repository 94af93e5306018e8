"""`--wait` of trigger and backfill: follow queued runs until all are done, one has failed for
good, or the time is up."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..db import Listings
from ..records import Queued, QueuedRun, QueuedState

POLL_SECONDS = 0.5  # between two reads of the runs not done yet
STATES: tuple[QueuedState, ...] = ("pending", "running", "done", "failed", "gone")
ENDED_BADLY: frozenset[QueuedState] = frozenset({"failed", "gone"})

Outcome = Literal["done", "failed", "timed_out"]


@dataclass(frozen=True)
class Waited:
    """How the wait ended: every run as last read, in the order they were queued."""

    outcome: Outcome
    runs: list[QueuedRun]
    seconds: float

    @property
    def counts(self) -> dict[str, int]:
        return count(self.runs)

    @property
    def failure(self) -> QueuedRun | None:
        """The first run that failed for good (or is gone), if any."""
        return next((run for run in self.runs if run.state in ENDED_BADLY), None)


def count(runs: Sequence[QueuedRun]) -> dict[str, int]:
    """How many runs are in each state (every state, zeros too)."""
    found = Counter(run.state for run in runs)
    return {state: found[state] for state in STATES}


def progress(counts: dict[str, int]) -> str:
    """One line: how far the queued runs are."""
    total = sum(counts.values())
    return (f"waiting: {counts['done']}/{total} done, {counts['running']} running, "
            f"{counts['pending']} pending")


def follow(listings: Listings, queued: Sequence[Queued], timeout: float | None,
           show: Callable[[str], None]) -> Waited:
    """Read the runs not done yet every POLL_SECONDS, `show` how far they are, and return once
    all are done, one failed for good, or `timeout` seconds (None: no limit) have passed. A
    done run is not read again (done is final)."""
    began = time.monotonic()
    latest = {run.id: QueuedRun(run, "pending", "pending", 0, None) for run in queued}
    while True:
        unsettled = [run for run in queued if latest[run.id].state != "done"]
        for found in listings.queued_runs(unsettled) if unsettled else []:
            latest[found.run.id] = found
        waited = time.monotonic() - began
        runs = [latest[run.id] for run in queued]
        outcome = _outcome(runs, timeout is not None and waited >= timeout)
        if outcome is not None:
            return Waited(outcome, runs, waited)
        show(progress(count(runs)))
        left = POLL_SECONDS if timeout is None else min(POLL_SECONDS, timeout - waited)
        time.sleep(max(0.0, left))


def _outcome(runs: Sequence[QueuedRun], out_of_time: bool) -> Outcome | None:
    if any(run.state in ENDED_BADLY for run in runs):
        return "failed"
    if all(run.state == "done" for run in runs):
        return "done"
    return "timed_out" if out_of_time else None
