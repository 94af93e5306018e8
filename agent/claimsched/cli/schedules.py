"""`claimsched apply` and `claimsched schedules`: write schedules, list them, next fire times."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from zoneinfo import ZoneInfo

from ..schedule.specs import load_claimschedules
from .common import Add, emit, iso, open_store


def apply(args: argparse.Namespace) -> int:
    specs = load_claimschedules(Path(args.file))
    store = open_store(args)
    try:
        written = [(s.job_name, store.schedules.upsert(s)) for s in specs]
    finally:
        store.close()
    results = [{"job": job, "result": "refused" if w.held_by else w.outcome, "owner": w.held_by}
               for job, w in written]
    if args.json:
        print(json.dumps(results))
    else:
        for row in results:
            held = f" (the job belongs to {row['owner']})" if row["owner"] else ""
            print(f"claimschedule/{row['job']} {row['result']}{held}")
    return 1 if any(row["owner"] for row in results) else 0


def schedules(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        records, now = store.schedules.load(), store.db_now()
        identity = store.admin.database_identity()
    finally:
        store.close()
    durability = identity.durability if identity else None
    rows = []
    for record in records:
        upcoming = record.parsed.next_after(max(now, record.active_from)) if record.enabled \
            else None
        rows.append(
            {
                "job": record.job_name,
                "schedule": record.schedule,
                "resolved": record.parsed.resolved,
                "time_zone": record.time_zone,
                "enabled": record.enabled,
                "suspended": record.suspended_at(now),
                "suspend_until": iso(record.suspend_until),
                "suspend_reason": record.suspend_reason,
                "source": record.source,
                "owner": record.owner,
                "policy": f"{record.concurrency_policy}/{record.catch_up_policy}",
                "next_utc": iso(upcoming),
                "next_local": upcoming.astimezone(ZoneInfo(record.time_zone)).isoformat()
                if upcoming
                else None,
                "durability": durability,
            }
        )
    for row in rows:  # the table's: the expression as it runs, hashed fields written out
        row["runs_as"] = (row["schedule"] if row["resolved"] == row["schedule"]
                          else f"{row['schedule']} (= {row['resolved']})")
    emit(args, rows, ["job", "runs_as", "time_zone", "suspended", "policy", "next_utc"],
         "schedules", wide=["suspend_until", "suspend_reason", "source", "owner", "next_local"],
         times=["next_utc"])
    return 0


def register(add: Add) -> None:
    add("apply", apply, "write the ClaimSchedules of a YAML file to the database").add_argument(
        "file", metavar="FILE.yaml"
    )
    add("schedules", schedules, "list schedules with their next fire times")
