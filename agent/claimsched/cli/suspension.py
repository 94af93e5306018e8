"""`claimsched suspend` and `claimsched resume`: stop a job's occurrences for a while."""

from __future__ import annotations

import argparse
import json

from ..db import Suspension
from ..errors import InvalidSpec
from ..schedule.specs import MAX_REASON
from .common import Add, instant, iso, open_store


def suspend(args: argparse.Namespace) -> int:
    until = instant(args.until) if args.until else None
    if args.reason is not None and len(args.reason) > MAX_REASON:
        raise InvalidSpec(f"suspend: --reason is longer than {MAX_REASON} characters")
    store = open_store(args)
    try:
        if until is not None and until <= store.db_now():
            raise InvalidSpec(f"suspend: --until {args.until} has passed already")
        row = store.schedules.suspend(args.job, until, args.reason)
    finally:
        store.close()
    return _said(args, row, f"suspended {args.job}" + (
        f" until {iso(until)}, then it resumes by itself" if until else " until resumed"))


def resume(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        row = store.schedules.resume(args.job)
    finally:
        store.close()
    return _said(args, row, f"resumed {args.job}: occurrences from now on run, none "
                            "that fell while it was suspended")


def _said(args: argparse.Namespace, row: Suspension, said: str) -> int:
    if args.json:
        print(json.dumps({"job": row.job_name, "enabled": row.enabled,
                          "suspend_until": iso(row.suspend_until),
                          "suspend_reason": row.suspend_reason}))
    else:
        print(said + (f" ({row.suspend_reason})" if row.suspend_reason else ""))
    return 0


def register(add: Add) -> None:
    stop = add("suspend", suspend, "suspend JOB: nothing that falls while suspended runs "
               "or is caught up (a ClaimSchedule's job: use its spec.suspend)")
    stop.add_argument("job")
    stop.add_argument("--until", metavar="ISO", help="resume by itself at this instant "
                      "(ISO 8601, e.g. 2026-11-30T06:00:00Z; no zone: UTC)")
    stop.add_argument("--reason", metavar="TEXT", help="why, for whoever looks (shown by "
                      "schedules, status and the web view)")
    add("resume", resume, "resume JOB from now on; what fell while suspended never runs"
        ).add_argument("job")
