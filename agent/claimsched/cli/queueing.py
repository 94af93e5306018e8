"""`claimsched trigger` and `claimsched backfill`: queue runs by hand, now or for a past range,
say which runs were queued, and with --wait follow them to their end."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from typing import Any

from .. import tables
from ..db import Listings, Store, redact_text
from ..errors import ClaimschedError, InvalidSpec, UnknownJob
from ..records import Queued, QueuedRun
from .common import Add, instant, iso, open_store
from .waiting import Waited, follow

MAX_BACKFILL = 10_000
TICK = timedelta(microseconds=1)
ERROR_SHOWN = 300  # characters of a failed run's error in the one-line message


def trigger(args: argparse.Namespace) -> int:
    check_wait(args)
    store = open_store(args)
    try:
        queued = store.listings.queue_runs(args.job, [store.db_now()], "manual")
        if not queued:
            raise ClaimschedError(f"a run of {args.job} at this instant already exists")
        warn_unhandled(store.listings, args.job)
        (run,) = queued
        result: dict[str, Any] = {"job": args.job, "id": run.id,
                                  "fire_time": iso(run.fire_time), "status": "pending"}
        said = f"triggered {args.job}: run {run.id} at {result['fire_time']} (pending)"
        if not args.wait:
            print(json.dumps(result) if args.json else said)
            return 0
        if not args.json:
            print(said, flush=True)
        waited = wait(store.listings, queued, args.timeout)
    finally:
        store.close()
    (found,) = waited.runs
    result |= {**run_json(found), **wait_json(waited)}
    return conclude(args, args.job, waited, result)


def backfill(args: argparse.Namespace) -> int:
    check_wait(args)
    start, end = instant(args.start), instant(args.end)
    if end <= start:
        raise InvalidSpec("backfill: TO must be after FROM")
    store = open_store(args)
    try:
        occurrences = _occurrences(store, args.job, start, end)
        with tables.progress(f"queueing {len(occurrences)} occurrences"):
            queued = (store.listings.queue_runs(args.job, occurrences, "backfill")
                      if occurrences else [])
        warn_unhandled(store.listings, args.job)
        result: dict[str, Any] = {
            "job": args.job,
            "occurrences": len(occurrences),
            "queued": len(queued),
            "already_present": len(occurrences) - len(queued),
            "runs": [{"id": run.id, "fire_time": iso(run.fire_time), "status": "pending"}
                     for run in queued],
        }
        if not args.json:
            print(tables.render("queued runs", ["id", "job", "fire_time"], [
                {"id": run.id, "job": run.job_name, "fire_time": iso(run.fire_time)}
                for run in queued]))
            print(f"backfill {args.job}: {result['queued']} queued, "
                  f"{result['already_present']} already ran or are queued", flush=True)
        if not args.wait:
            if args.json:
                print(json.dumps(result))
            return 0
        waited = wait(store.listings, queued, args.timeout)
    finally:
        store.close()
    result |= {"runs": [run_json(found) for found in waited.runs], **wait_json(waited)}
    return conclude(args, args.job, waited, result)


def _occurrences(store: Store, job: str, start: datetime, end: datetime) -> list[datetime]:
    """The job's occurrences from `start` to `end` (both included), all in the past."""
    now = store.db_now()
    if end > now:
        raise InvalidSpec(
            f"backfill: TO ({iso(end)}) is in the future (database clock {iso(now)}); "
            "occurrences still to come run at their time"
        )
    records = {r.job_name: r for r in store.schedules.load()}
    if job not in records:
        raise UnknownJob(f"no schedule for job {job!r}")
    occurrences = records[job].parsed.between(start - TICK, end, limit=MAX_BACKFILL + 1)
    occurrences = [t for t in occurrences if start <= t <= end]
    if len(occurrences) > MAX_BACKFILL:
        raise InvalidSpec(f"backfill: more than {MAX_BACKFILL} occurrences; use a shorter range")
    return occurrences


def check_wait(args: argparse.Namespace) -> None:
    """--timeout goes with --wait, and is a positive number of seconds."""
    if args.timeout is None:
        return
    if not args.wait:
        raise InvalidSpec("--timeout needs --wait")
    if args.timeout <= 0:
        raise InvalidSpec(f"--timeout must be a positive number of seconds, not {args.timeout:g}")


def warn_unhandled(listings: Listings, job: str) -> None:
    """One line on stderr when no live agent has a handler for `job`: its runs wait for one."""
    if any(agent.alive and job in agent.handlers for agent in listings.agents()):
        return
    print(f"claimsched: warning: no live agent handles job {job!r}; its queued runs wait "
          "until one starts", file=sys.stderr)


def wait(listings: Listings, queued: list[Queued], timeout: float | None) -> Waited:
    """Follow the queued runs, with a line of progress on a terminal."""
    with tables.StatusLine() as line:
        return follow(listings, queued, timeout, line.show)


def run_json(found: QueuedRun) -> dict[str, Any]:
    """A queued run as the JSON output shows it once waited for."""
    return {
        "id": found.run.id,
        "fire_time": iso(found.run.fire_time),
        "status": found.status,
        "state": found.state,
        "attempt": found.attempt,
        "error": redact_text(found.error) if found.error else None,
    }


def wait_json(waited: Waited) -> dict[str, Any]:
    return {"outcome": waited.outcome, "counts": waited.counts,
            "waited_seconds": round(waited.seconds, 3)}


def conclude(args: argparse.Namespace, job: str, waited: Waited,
             result: dict[str, Any]) -> int:
    """Print the final state (JSON) or a line (done); a failure or a timeout is an error."""
    if args.json:
        print(json.dumps(result))
    if waited.outcome == "done":
        if not args.json:
            print(f"{job}: all {len(waited.runs)} queued run(s) done in {waited.seconds:.1f} s")
        return 0
    raise ClaimschedError(failure_line(job, waited, args.timeout))


def failure_line(job: str, waited: Waited, timeout: float | None) -> str:
    """Why the wait ended without every run done, in one line."""
    counts = waited.counts
    total = len(waited.runs)
    failed = waited.failure
    if failed is None:
        return (f"timed out after {timeout:g} s: {total - counts['done']} of {total} queued "
                f"run(s) of {job} not done ({counts['pending']} pending, "
                f"{counts['running']} running)")
    run = failed.run
    if failed.state == "gone":
        what = "is gone"
    elif failed.status == "skipped":
        what = "was skipped"
    else:
        what = f"failed for good (attempt {failed.attempt})"
    error = " ".join(redact_text(failed.error).split())[:ERROR_SHOWN] if failed.error else ""
    return (f"run {run.id} of {job} at {iso(run.fire_time)} {what}"
            f"{': ' + error if error else ''} ({counts['done']} of {total} done)")


def register(add: Add) -> None:
    one = add("trigger", trigger, "queue one manual run of JOB now; print its id and fire time")
    one.add_argument("job")
    many = add("backfill", backfill, "queue the occurrences of JOB between FROM and TO; print "
               "the runs queued")
    many.add_argument("job")
    many.add_argument("start", metavar="FROM")
    many.add_argument("end", metavar="TO")
    for queue in (one, many):
        queue.add_argument(
            "--wait", action="store_true",
            help="then show progress until every run queued is done (exit 0), or one failed "
            "for good (exit 1, naming it)")
        queue.add_argument(
            "--timeout", type=float, metavar="SECONDS",
            help="with --wait: give up after this long (exit 1, saying how many are still "
            "pending or running); default: no limit")
