"""`claimsched migrate`, `maintain` and `roles`: the schema, its partitions, its database roles."""

from __future__ import annotations

import argparse
import dataclasses
import json

from .. import tables
from ..db import AGENT_ROLE, OPERATOR_ROLE, Roles
from ..errors import InvalidSpec
from .common import Add, open_store


def migrate(args: argparse.Namespace) -> int:
    """Migrate, then say which versions of the agent API the schema serves and which live
    agents call each: what a rolling upgrade still needs, and what a later release may drop."""
    store = open_store(args, check=False)
    try:
        served = store.admin.served_agent_apis()
        with tables.progress("migrating"):
            applied = store.admin.migrate()
        version = store.admin.schema_version()
        apis = store.admin.agent_apis()
    finally:
        store.close()
    dropped = sorted(served - {api.api for api in apis})
    summary = {
        "applied": applied, "schema_version": version, "schema": args.schema,
        "agent_apis": [dataclasses.asdict(api) for api in apis], "dropped_agent_apis": dropped,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        done = ", ".join(map(str, applied)) if applied else "nothing to do"
        print(f"schema {args.schema} at version {version} (applied: {done})")
        for api in apis:
            print(api)
        gone = ", ".join(f"v{api}" for api in dropped) or (
            "none (a later release's migration drops an older one once no live agent calls it)")
        print(f"agent API versions dropped: {gone}")
    return 0


def maintain(args: argparse.Namespace) -> int:
    store = open_store(args, check=False)
    try:
        with tables.progress("maintaining partitions and retention"):
            summary = store.admin.maintain(args.retention_days)
    finally:
        store.close()
    done = dataclasses.asdict(summary)
    print(json.dumps(done) if args.json else "\n".join(f"{k}: {v}" for k, v in done.items()))
    return 0


def roles(args: argparse.Namespace) -> int:
    if args.all_jobs and (args.jobs or args.jobs_like):
        raise InvalidSpec("roles: --all-jobs, or --jobs/--jobs-like, not both")
    scoped = args.all_jobs or args.jobs or args.jobs_like
    names = Roles(agent=args.agent_role, operator=args.operator_role,
                  jobs=tuple(args.jobs or ()) if scoped else None,
                  jobs_like=tuple(args.jobs_like or ()) if scoped else None,
                  team=args.team_role)
    store = open_store(args)
    try:
        store.admin.grant_roles(names)
        matching = store.admin.scoped_jobs(names.agent)
    finally:
        store.close()
    summary = {"agent_role": names.agent, "operator_role": names.operator, "schema": args.schema,
               "agent_scope": names.patterns if scoped else None, "agent_jobs": matching,
               "team_role": names.team}
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"roles {names.agent} (agents) and {names.operator} (operator, CLI) can use schema "
          f"{args.schema}; give each a password with ALTER ROLE ... PASSWORD")
    if names.team:
        print(f"{names.team} (a team's CLI and web view) reads, triggers, suspends and applies "
              f"the jobs of {names.agent}'s scope only")
    if matching is None:
        print(f"{names.agent} acts for every job")
    else:
        jobs = ", ".join(j for j in matching) or "none yet"
        print(f"{names.agent} acts for the jobs {_scope(names, scoped)}: today {jobs}")
    return 0


def _scope(names: Roles, scoped: bool) -> str:
    if not scoped:
        return "of its scope"
    parts = [f"named {', '.join(names.jobs)}" if names.jobs else "",
             f"like {', '.join(names.jobs_like)}" if names.jobs_like else ""]
    return " or ".join(p for p in parts if p)


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
    command.add_argument("--jobs", action="append", metavar="NAME",
                         help="the agent role acts only for these jobs, by exact name "
                              "(repeatable; '_' and '%%' are plain characters): its claims, "
                              "reclaims and code declarations of other jobs are refused. "
                              "With --jobs-like, replaces its previous scope; without either "
                              "the scope stays as it is")
    command.add_argument("--jobs-like", action="append", metavar="PATTERN",
                         help="and the jobs whose names match this LIKE pattern ('team-a-%%': "
                              "'%%' any characters, '_' any one character, '\\' escapes; "
                              "repeatable)")
    command.add_argument("--team-role", metavar="NAME",
                         help="also a role for the team's people and tools (the CLI, `claimsched "
                              "web`): the operator role's rights on the jobs of this scope only "
                              "(needs --jobs or --jobs-like)")
    command.add_argument("--all-jobs", action="store_true",
                         help="the agent role acts for every job again (the default of a new "
                              "role)")
    command.epilog = ("No password is set: give one with ALTER ROLE <name> PASSWORD '...' (or log "
                      "in with certificates or your cloud's IAM). Run agents with "
                      "CLAIMSCHED_MIGRATE=false.")
