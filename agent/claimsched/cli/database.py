"""`claimsched migrate`, `maintain` and `roles`: the schema, its partitions, its database roles."""

from __future__ import annotations

import argparse
import json

from .. import tables
from ..db import AGENT_ROLE, OPERATOR_ROLE, Roles
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


def roles(args: argparse.Namespace) -> int:
    jobs = () if args.all_jobs else tuple(args.jobs) if args.jobs else None
    names = Roles(agent=args.agent_role, operator=args.operator_role, jobs=jobs)
    store = open_store(args)
    try:
        store.grant_roles(names)
    finally:
        store.close()
    summary = {"agent_role": names.agent, "operator_role": names.operator, "schema": args.schema,
               "agent_jobs": None if jobs is None else sorted(set(jobs))}
    if args.json:
        print(json.dumps(summary))
    else:
        scope = "" if jobs is None else f"; {names.agent} acts for " + (
            f"the jobs matching {', '.join(sorted(set(jobs)))}" if jobs else "every job")
        print(f"roles {names.agent} (agents) and {names.operator} (operator, CLI) can use schema "
              f"{args.schema}{scope}; give each a password with ALTER ROLE ... PASSWORD")
    return 0


def register(add: Add) -> None:
    add("migrate", migrate, "create or upgrade claimsched's tables (idempotent)")
    add(
        "maintain", maintain, "create partitions ahead, drop history past retention"
    ).add_argument("--retention-days", type=int, default=90, help="keep this many days (90)")
    command = add("roles", roles, "create or update the agents' and the operator's database "
                  "roles: agents write only through fenced functions (run as the schema's owner, "
                  "after migrate; idempotent)")
    command.add_argument("--agent-role", default=AGENT_ROLE, metavar="NAME",
                         help=f"the apps' agents' role (default {AGENT_ROLE})")
    command.add_argument("--operator-role", default=OPERATOR_ROLE, metavar="NAME",
                         help=f"the operator's and the CLI's role (default {OPERATOR_ROLE})")
    scope = command.add_mutually_exclusive_group()
    scope.add_argument("--jobs", action="append", metavar="PATTERN",
                       help="the agent role acts only for the jobs whose names match one of "
                            "these LIKE patterns ('billing', 'team-a-%%'; repeatable): its claims, "
                            "reclaims and code declarations of other jobs are refused. Replaces "
                            "its previous scope; without --jobs the scope stays as it is")
    scope.add_argument("--all-jobs", action="store_true",
                       help="the agent role acts for every job again (the default of a new role)")
    command.epilog = ("No password is set: give one with ALTER ROLE <name> PASSWORD '...' (or log "
                      "in with certificates or your cloud's IAM). Run agents with "
                      "CLAIMSCHED_MIGRATE=false.")
