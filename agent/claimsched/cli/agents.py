"""`claimsched agents`: the agents that said they exist, and whether they are alive."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from .common import Add, emit, iso, open_store


def agents(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        rows = [
            {
                **dataclasses.asdict(a),
                "handlers": ",".join(a.handlers),
                "jobs": len(a.handlers),
                "last_seen": iso(a.last_seen),
                "started_at": iso(a.started_at),
            }
            for a in store.listings.agents()
        ]
    finally:
        store.close()
    emit(args, rows, ["agent_id", "alive", "version", "api", "jobs", "last_seen"], "agents",
         wide=["hostname", "pod", "durability", "tzdata", "started_at", "handlers"],
         times=["last_seen"])
    versions = sorted({str(a["tzdata"]) for a in rows if a["alive"] and a["tzdata"]})
    if len(versions) > 1:
        print(
            f"claimsched: warning: live agents compute fire times with different time zone "
            f"databases ({', '.join(versions)}): a local time may map to two instants and run "
            "twice; give every replica the same tzdata",
            file=sys.stderr,
        )
    return 0


def register(add: Add) -> None:
    add("agents", agents, "list agents and whether they are alive")
