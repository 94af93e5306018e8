"""`claimsched runs` and `claimsched status`: recent runs, and whether a job's last one happened."""

from __future__ import annotations

import argparse
import dataclasses
import json
from datetime import datetime
from typing import Any

from ..db import RunRow, Views
from ..errors import ClaimschedError, UnknownJob
from ..schedule.deadlines import DEFAULT_GRACE
from ..web.model import summary
from ..web.verdict import judge
from .common import Add, emit, iso, open_store


def runs(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        found = store.listings.runs(args.job, args.status, args.limit)
    finally:
        store.close()
    rows = [_row(r) for r in found]
    if args.attempts and not args.json and args.output in ("table", "wide"):
        emit(args, [{"id": r["id"], "job_name": r["job_name"], "fire_time": r["fire_time"], **a}
                    for r in rows for a in r["attempts"]],
             ["id", "job_name", "fire_time", "attempt", "claimed_by", "outcome", "ended_at"],
             "attempts", wide=["started_at", "error"], times=["fire_time", "ended_at"])
        return 0
    for row in rows:  # the table's: who ran it, attempt by attempt
        row["ran_by"] = " → ".join(a["claimed_by"] or "?" for a in row["attempts"])
    emit(args, rows, ["id", "job_name", "fire_time", "status", "attempt", "ran_by", "finished_at"],
         "runs", wide=["kind", "started_at", "lease_until", "orphan_count", "retry_at", "error"],
         times=["fire_time", "finished_at"])
    return 0


def _row(run: RunRow) -> dict[str, Any]:
    """A run as the CLI shows it: times in UTC ISO 8601, and `attempts`, oldest first: those a
    later attempt superseded (orphaned, fenced_out, failed), then the run's own."""
    found = dataclasses.asdict(run)
    superseded = [{**a, **{k: iso(datetime.fromisoformat(a[k])) if a[k] else None
                           for k in ("started_at", "ended_at")}}
                  for a in found.pop("superseded")]
    times = {k: iso(found[k])
             for k in ("fire_time", "started_at", "finished_at", "lease_until", "retry_at")}
    row = {**found, **times}
    last = {"attempt": row["attempt"], "claimed_by": row["claimed_by"],
            "started_at": row["started_at"], "ended_at": row["finished_at"],
            "outcome": row["status"], "error": row["error"]}
    row["attempts"] = [*superseded, last] if row["attempt"] > 0 else superseded
    return row


def status(args: argparse.Namespace) -> int:
    """Exit 0 when the job is healthy, 2 when not (1: could not tell)."""
    store = open_store(args)
    try:
        # the web view's reading of occurrences
        found = summary(Views(store), args.job, args.late_after)
    finally:
        store.close()
    if found is None:
        raise UnknownJob(f"no schedule for job {args.job!r}")
    if found.problem is not None:
        raise ClaimschedError(f"job {args.job}: {found.problem}")
    health = judge(found)
    print(json.dumps(health.json()) if args.json else health.line())
    return 0 if health.healthy else 2


def register(add: Add) -> None:
    listing = add("runs", runs, "list recent runs, newest first")
    listing.add_argument("--job")
    listing.add_argument(
        "--status", choices=["pending", "running", "done", "failed", "orphaned", "skipped"]
    )
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--attempts", action="store_true",
                         help="one line per attempt: who held it, when, and how it ended "
                         "(orphaned, fenced_out, failed, or the run's status)")
    check = add("status", status, "is JOB healthy: did its last due occurrence happen, is none "
                "late, does a live agent handle it? One line; exit 0 if healthy (done, running, "
                "skipped, waiting, due, suspended, with a live agent while enabled), 2 if not "
                "(failed, missed, late, disabled, or no live agent): a health check")
    check.add_argument("job")
    check.add_argument("--late-after", type=int, default=None, metavar="SECONDS",
                       help="an occurrence with no run this long after its fire time is late "
                       f"(default: {DEFAULT_GRACE})")
