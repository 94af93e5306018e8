"""When things happened, for the chaos checks that are about time.

Three witnesses: the audit trail of job_runs (every version of every row, stamped with the
server's clock and its transaction's commit time), the receipts' commit times, and the handlers'
own traces (bench/chaos/app.py: start and end of each handler on the monotonic clock, which the
harness maps to wall time; a skewed replica's wall clock would lie). From them:

- Forbid: no two runs of a Forbid job in progress at once, where in progress is what the
  database counts as busy (running, or orphaned awaiting reclaim), and no two runs' handlers
  working at once, a handler's span being its start to its end or its lease's end, whichever
  came first (a paused handler that wakes after its lease works on, fenced out);
- outages: what became of handlers that finished while Postgres was away (recorded done late,
  or reclaimed first and repeated); a run recorded done must not have had a failing handler;
- receipts: none commits after a later attempt of its occurrence was granted (a handler frozen
  inside `run.once()` must not commit its receipt once another attempt began); an external call
  repeated by a later attempt carries the same idempotency key.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BUSY = ("running", "orphaned")
NEVER = datetime.max.replace(tzinfo=UTC)
SLACK = timedelta(milliseconds=50)  # the mapping of a handler's monotonic clock to wall time


@dataclass
class Attempt:
    """One attempt of one occurrence, as the audit trail saw it."""

    rid: int
    attempt: int
    granted: datetime  # server clock, inside the granting transaction
    granted_commit: datetime | None  # its commit (track_commit_timestamp)
    lease_end: datetime | None = None  # the last lease_until it held while running
    left: datetime | None = None  # when its row stopped being running with this attempt
    finished: datetime | None = None  # when its row became done or failed with this attempt
    status: str = "running"  # the last status its row had with this attempt
    error: str | None = None

    @property
    def authority_end(self) -> datetime:
        """Until when it could act: its row left running, or its lease ran out, if earlier."""
        return min(self.left or NEVER, self.lease_end or NEVER)


# (from, to, fire time, run id or attempt): an occurrence in progress, or its handler at work
Span = tuple[datetime, datetime, datetime, int]


def _overlapping(spans: list[Span], slack: timedelta = timedelta(0)) -> Iterator[tuple[Span, Span]]:
    """Pairs (earlier, later) of spans of different occurrences that overlap by more than slack."""
    widest: Span | None = None
    for span in sorted(spans):
        if widest is not None and widest[2] != span[2] and span[0] + slack < widest[1]:
            yield widest, span
        if widest is None or span[1] > widest[1]:
            widest = span


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _hms(moment: datetime) -> str:
    return f"{moment:%H:%M:%S.%f}"[:-3] if moment != NEVER else "never"


@dataclass
class Trace:
    """The handlers' own records: (job, fire time, attempt) -> wall time and outcome."""

    ends: dict[tuple[str, datetime, int], tuple[datetime, str]] = field(default_factory=dict)
    frozen: list[tuple[str, datetime, int]] = field(default_factory=list)

    @classmethod
    def read(cls, folder: Path, mono_to_wall: float) -> Trace:
        trace = cls()
        for path in sorted(folder.glob("trace-*.jsonl")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:  # a line cut by SIGKILL: nothing to learn from it
                    continue
                key = (event["job"], _at(event["fire_time"]), event["attempt"])
                wall = datetime.fromtimestamp(event["mono"] + mono_to_wall, UTC)
                if event["event"] == "end":
                    trace.ends[key] = (wall, event["outcome"])
                elif event["event"] == "frozen":
                    trace.frozen.append(key)
        return trace


class Timeline:
    """The audit trail replayed: busy intervals per job and every attempt's life."""

    def __init__(self, audit: list[tuple[Any, ...]]) -> None:
        # job -> (from, to, fire time, run id) while the run was busy
        self.busy: dict[str, list[Span]] = defaultdict(list)
        self.attempts: dict[tuple[str, datetime, int], Attempt] = {}
        state: dict[int, dict[str, Any]] = {}
        opened: dict[int, datetime] = {}
        for _seq, op, at, committed, _old, new in audit:
            if op == "DELETE" or state.get(new["id"]) == new:  # maintenance moving a row
                continue
            rid = new["id"]
            prev = state.get(rid)
            state[rid] = new
            job, fire = new["job_name"], _at(new["fire_time"])
            was_busy = prev is not None and prev["status"] in BUSY
            if new["status"] in BUSY and not was_busy:
                opened[rid] = at
            elif was_busy and new["status"] not in BUSY:
                self.busy[job].append((opened.pop(rid), at, fire, rid))
            if prev is not None and prev["status"] == "running":
                before = self.attempts.get((job, fire, prev["attempt"]))
                if before is not None and before.left is None and (
                    new["status"] != "running" or new["attempt"] != prev["attempt"]
                ):
                    before.left = at
            key = (job, fire, new["attempt"])
            if new["status"] == "running" and (prev is None or prev["attempt"] != new["attempt"]):
                self.attempts[key] = Attempt(rid, new["attempt"], at, committed)
            attempt = self.attempts.get(key)
            if attempt is None:
                continue
            attempt.status, attempt.error = new["status"], new["error"]
            if new["status"] == "running" and attempt.left is None and new["lease_until"]:
                attempt.lease_end = _at(new["lease_until"])
            if new["status"] in ("done", "failed") and attempt.finished is None:
                attempt.finished = at
        for rid, since in opened.items():
            row = state[rid]
            self.busy[row["job_name"]].append((since, NEVER, _at(row["fire_time"]), rid))

    def of(self, job: str, fire: datetime) -> list[Attempt]:
        return [a for (j, f, _), a in self.attempts.items() if (j, f) == (job, fire)]


class TimeChecks:
    """The checks of this module; each finding is one line, counts go to `stats`."""

    def __init__(self, jobs: list[dict[str, Any]], timeline: Timeline, trace: Trace) -> None:
        self.forbid = sorted(j["name"] for j in jobs if j["concurrency_policy"] == "Forbid")
        self.once = {j["name"]: j.get("once") for j in jobs}
        self.timeline = timeline
        self.trace = trace
        self.stats: Counter[str] = Counter()
        self.found: list[str] = []

    def run(
        self,
        runs: list[tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
        receipts: list[tuple[Any, ...]],
        external: list[tuple[Any, ...]],
        outages: list[tuple[str, datetime, datetime]],
    ) -> list[str]:
        by_key = {(r[1], r[2]): r for r in runs}
        self.forbid_busy()
        self.forbid_handlers(starts)
        self.outcomes(by_key)
        self.outages(by_key, outages)
        self.receipts(receipts)
        self.frozen(receipts, external)
        return self.found

    # at most one run of a Forbid job in progress, by the database's own definition
    def forbid_busy(self) -> None:
        for job in self.forbid:
            self.stats["forbid_busy_spans"] += len(self.timeline.busy[job])
            for first, second in _overlapping(self.timeline.busy[job]):
                self.found.append(
                    f"Forbid job {job}: runs @ {_hms(first[2])} and @ {_hms(second[2])} in "
                    f"progress at once (the second from {_hms(second[0])}, the first "
                    f"{_hms(first[0])}..{_hms(first[1])})"
                )

    # no two runs' handlers of a Forbid job at work at once while each held its lease
    def forbid_handlers(self, starts: list[tuple[Any, ...]]) -> None:
        spans: dict[str, list[Span]] = defaultdict(list)
        for job, fire, _agent, attempt, at in starts:
            granted = self.timeline.attempts.get((job, fire, attempt))
            if job not in self.forbid or granted is None:
                continue
            ended = min(self.trace.ends.get((job, fire, attempt), (NEVER, ""))[0],
                        granted.authority_end)
            if ended <= at:  # it began after its lease had ended (a paused replica): fenced out
                self.stats["handlers_started_after_their_lease"] += 1
                continue
            spans[job].append((at, ended, fire, attempt))
        for job, found in spans.items():
            self.stats["forbid_handler_spans"] += len(found)
            for first, second in _overlapping(found, SLACK):
                self.found.append(
                    f"Forbid job {job}: handlers of the runs @ {_hms(first[2])} (attempt "
                    f"{first[3]}, until {_hms(first[1])}) and @ {_hms(second[2])} (attempt "
                    f"{second[3]}, from {_hms(second[0])}) at work at once"
                )

    # a run recorded done had a handler that succeeded; completions after the lease, counted
    def outcomes(self, by_key: dict[tuple[str, datetime], tuple[Any, ...]]) -> None:
        for (job, fire), row in by_key.items():
            status, attempt = row[3], row[4]
            ended = self.trace.ends.get((job, fire, attempt))
            if status == "done" and ended is not None and ended[1] != "ok":
                self.found.append(
                    f"{job} @ {_hms(fire)}: recorded done by attempt {attempt}, whose handler "
                    "failed"
                )
        for attempt in self.timeline.attempts.values():
            finished, lease_end = attempt.finished, attempt.lease_end
            if attempt.status == "done" and finished and lease_end and finished > lease_end:
                self.stats["completions_after_lease_end"] += 1

    # handlers that finished while Postgres was away: recorded late, or repeated
    def outages(
        self,
        by_key: dict[tuple[str, datetime], tuple[Any, ...]],
        outages: list[tuple[str, datetime, datetime]],
    ) -> None:
        for (job, fire, number), (wall, outcome) in self.trace.ends.items():
            inside = [kind for kind, low, high in outages if low <= wall <= high]
            attempt = self.timeline.attempts.get((job, fire, number))
            if outcome != "ok" or not inside or attempt is None:
                continue
            where = f"{job} @ {_hms(fire)} attempt {number}"
            self.stats["handlers_finished_during_outage"] += 1
            if "long_outage" in inside:
                self.stats["handlers_finished_during_long_outage"] += 1
            row = by_key.get((job, fire))
            if attempt.status == "done":
                self.stats["completed_late"] += 1
                if attempt.finished and attempt.lease_end and attempt.finished > attempt.lease_end:
                    self.stats["completed_late_after_lease_end"] += 1
            elif row is not None and row[4] > number:
                self.stats["reclaimed_before_late_completion"] += 1
            elif attempt.status == "failed" and "attempts exhausted" in (attempt.error or ""):
                self.stats["exhausted_during_outage"] += 1
            else:
                self.found.append(
                    f"{where} finished during an outage; its row is {attempt.status} "
                    f"({attempt.error}) though nobody reclaimed it"
                )

    # a receipt commits before any later attempt of its occurrence is granted
    def receipts(self, receipts: list[tuple[Any, ...]]) -> None:
        for entity, job, fire, number, committed in receipts:
            for later in self.timeline.of(job, fire):
                granted = later.granted_commit
                if later.attempt > number and granted is not None and committed >= granted:
                    self.found.append(
                        f"receipt {entity!r} of {job} @ {_hms(fire)} by attempt {number} "
                        f"committed after attempt {later.attempt} was granted "
                        f"({_hms(committed)} >= {_hms(granted)})"
                    )

    # the handlers frozen inside once(): what became of their receipts and external calls
    def frozen(self, receipts: list[tuple[Any, ...]], external: list[tuple[Any, ...]]) -> None:
        calls: dict[tuple[str, datetime, str], list[str]] = defaultdict(list)
        for job, fire, entity, key, _agent, _attempt in external:
            calls[(job, fire, entity)].append(key)
        for (job, fire, entity), keys in calls.items():
            self.stats["external_calls"] += len(keys)
            self.stats["external_calls_repeated"] += len(keys) - 1
            if len(set(keys)) > 1:
                self.found.append(
                    f"external call {entity!r} of {job} @ {_hms(fire)} repeated under "
                    f"{len(set(keys))} idempotency keys"
                )
        by_occurrence = {(r[1], r[2]): r[3] for r in receipts if r[0] == self.once.get(r[1])}
        for job, fire, number in self.trace.frozen:
            self.stats["frozen_inside_once"] += 1
            receipt = by_occurrence.get((job, fire))
            if receipt == number:
                self.stats["frozen_receipt_committed"] += 1
            else:
                self.stats["frozen_receipt_rolled_back"] += 1
