"""`claimsched trigger` and `claimsched backfill`: queue runs by hand, now or for a past range."""

from __future__ import annotations

import argparse
import json
from datetime import timedelta

from .. import tables
from ..errors import ClaimschedError, InvalidSpec, UnknownJob
from .common import Add, instant, iso, open_store

MAX_BACKFILL = 10_000
TICK = timedelta(microseconds=1)


def trigger(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        queued = store.request_runs(args.job, [store.db_now()], "manual")
    finally:
        store.close()
    if not queued:
        raise ClaimschedError(f"a run of {args.job} at this instant already exists")
    result = {"job": args.job, "fire_time": iso(queued[0]), "status": "pending"}
    print(
        json.dumps(result)
        if args.json
        else f"triggered {args.job} (fire_time {result['fire_time']})"
    )
    return 0


def backfill(args: argparse.Namespace) -> int:
    start, end = instant(args.start), instant(args.end)
    if end <= start:
        raise InvalidSpec("backfill: TO must be after FROM")
    store = open_store(args)
    try:
        now = store.db_now()
        if end > now:
            raise InvalidSpec(
                f"backfill: TO ({iso(end)}) is in the future (database clock {iso(now)}); "
                "occurrences still to come run at their time"
            )
        records = {r.job_name: r for r in store.load_schedules()}
        if args.job not in records:
            raise UnknownJob(f"no schedule for job {args.job!r}")
        record = records[args.job]
        occurrences = record.parsed.between(start - TICK, end, limit=MAX_BACKFILL + 1)
        occurrences = [t for t in occurrences if start <= t <= end]
        if len(occurrences) > MAX_BACKFILL:
            raise InvalidSpec(
                f"backfill: more than {MAX_BACKFILL} occurrences; use a shorter range"
            )
        with tables.progress(f"queueing {len(occurrences)} occurrences"):
            queued = store.request_runs(args.job, occurrences, "backfill") if occurrences else []
    finally:
        store.close()
    result = {
        "job": args.job,
        "occurrences": len(occurrences),
        "queued": len(queued),
        "already_present": len(occurrences) - len(queued),
    }
    print(
        json.dumps(result)
        if args.json
        else f"backfill {args.job}: {result['queued']} queued, "
        f"{result['already_present']} already ran or are queued"
    )
    return 0


def register(add: Add) -> None:
    add("trigger", trigger, "queue one manual run of JOB now").add_argument("job")
    queue = add("backfill", backfill, "queue the occurrences of JOB between FROM and TO")
    queue.add_argument("job")
    queue.add_argument("start", metavar="FROM")
    queue.add_argument("end", metavar="TO")
