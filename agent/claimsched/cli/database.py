"""`claimsched migrate` and `claimsched maintain`: the schema and its partitions."""

from __future__ import annotations

import argparse
import json

from .. import tables
from .common import Add, open_store


def migrate(args: argparse.Namespace) -> int:
    store = open_store(args, check=False)
    try:
        with tables.progress("migrating"):
            applied = store.migrate()
        version = store.schema_version()
    finally:
        store.close()
    summary = {"applied": applied, "schema_version": version, "schema": args.schema}
    if args.json:
        print(json.dumps(summary))
    else:
        done = ", ".join(map(str, applied)) if applied else "nothing to do"
        print(f"schema {args.schema} at version {version} (applied: {done})")
    return 0


def maintain(args: argparse.Namespace) -> int:
    store = open_store(args, check=False)
    try:
        with tables.progress("maintaining partitions and retention"):
            summary = store.maintain(args.retention_days)
    finally:
        store.close()
    print(json.dumps(summary) if args.json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 0


def register(add: Add) -> None:
    add("migrate", migrate, "create or upgrade claimsched's tables (idempotent)")
    add(
        "maintain", maintain, "create partitions ahead, drop history past retention"
    ).add_argument("--retention-days", type=int, default=90, help="keep this many days (90)")
