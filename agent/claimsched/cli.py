"""The `claimsched` command: migrate, run an agent, apply schedules, inspect runs, trigger."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from . import logs, tables, web
from .agent import Agent
from .db import AGENT_ROLE, OPERATOR_ROLE, Roles, Store, Views, redact_dsn
from .errors import ClaimschedError, ConfigurationError, InvalidSpec, UnknownJob
from .settings import AgentSettings
from .specs import MAX_REASON, load_claimschedules
from .version import __version__
from .web.model import summary
from .web.verdict import LATE_AFTER_SECONDS, judge

MAX_BACKFILL = 10_000


def _dsn(args: argparse.Namespace) -> str:
    dsn: str | None = args.dsn or os.environ.get("CLAIMSCHED_DSN")
    if not dsn:
        raise ConfigurationError("no database: pass --dsn or set CLAIMSCHED_DSN")
    return dsn


def _store(args: argparse.Namespace, *, check: bool = True) -> Store:
    store = Store(_dsn(args), schema=args.schema, max_size=2, name="claimsched-cli")
    store.open(timeout=args.connect_timeout)
    if check:  # never read or write a schema this code does not understand
        try:
            store.check_version()
        except ClaimschedError:
            store.close()
            raise
    return store


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def _emit(
    args: argparse.Namespace, rows: list[dict[str, Any]], columns: Sequence[str], title: str
) -> None:
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return
    print(tables.render(title, columns, rows))


# -- commands ----------------------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    store = _store(args, check=False)
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


def cmd_maintain(args: argparse.Namespace) -> int:
    store = _store(args, check=False)
    try:
        with tables.progress("maintaining partitions and retention"):
            summary = store.maintain(args.retention_days)
    finally:
        store.close()
    print(json.dumps(summary) if args.json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 0


def cmd_roles(args: argparse.Namespace) -> int:
    roles = Roles(agent=args.agent_role, operator=args.operator_role)
    store = _store(args)
    try:
        store.grant_roles(roles)
    finally:
        store.close()
    summary = {"agent_role": roles.agent, "operator_role": roles.operator, "schema": args.schema}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"roles {roles.agent} (agents) and {roles.operator} (operator, CLI) can use schema "
              f"{args.schema}; give each a password with ALTER ROLE ... PASSWORD")
    return 0


def cmd_agent(args: argparse.Namespace) -> int:
    module_name, _, attr = args.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from None
    agent = getattr(module, attr or "agent", None)
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"{args.target} is not a claimsched.Agent")
    logs.configure(agent.settings.log_level)
    return agent.run_forever()


def cmd_apply(args: argparse.Namespace) -> int:
    specs = load_claimschedules(Path(args.file))
    store = _store(args)
    try:
        written = [(s.job_name, store.upsert_schedule(s)) for s in specs]
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


def cmd_schedules(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        records, now = store.load_schedules(), store.db_now()
        identity = store.database_identity()
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
                "suspend_until": _iso(record.suspend_until),
                "suspend_reason": record.suspend_reason,
                "source": record.source,
                "owner": record.owner,
                "policy": f"{record.concurrency_policy}/{record.catch_up_policy}",
                "next_utc": _iso(upcoming),
                "next_local": upcoming.astimezone(ZoneInfo(record.time_zone)).isoformat()
                if upcoming
                else None,
                "durability": durability,
            }
        )
    _emit(
        args,
        rows,
        ["job", "schedule", "resolved", "time_zone", "suspended", "suspend_until",
         "suspend_reason", "source", "policy", "next_local", "next_utc"],
        "schedules",
    )
    return 0


def cmd_suspend(args: argparse.Namespace) -> int:
    until = _instant(args.until) if args.until else None
    if args.reason is not None and len(args.reason) > MAX_REASON:
        raise InvalidSpec(f"suspend: --reason is longer than {MAX_REASON} characters")
    store = _store(args)
    try:
        if until is not None and until <= store.db_now():
            raise InvalidSpec(f"suspend: --until {args.until} has passed already")
        row = store.suspend_schedule(args.job, until, args.reason)
    finally:
        store.close()
    return _suspension(args, row, f"suspended {args.job}" + (
        f" until {_iso(until)}, then it resumes by itself" if until else " until resumed"))


def cmd_resume(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        row = store.resume_schedule(args.job)
    finally:
        store.close()
    return _suspension(args, row, f"resumed {args.job}: occurrences from now on run, none "
                                  "that fell while it was suspended")


def _suspension(args: argparse.Namespace, row: dict[str, Any], said: str) -> int:
    if args.json:
        print(json.dumps({"job": row["job_name"], "enabled": row["enabled"],
                          "suspend_until": _iso(row["suspend_until"]),
                          "suspend_reason": row["suspend_reason"]}))
    else:
        print(said + (f" ({row['suspend_reason']})" if row["suspend_reason"] else ""))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        runs = store.list_runs(args.job, args.status, args.limit)
    finally:
        store.close()
    rows = [
        {
            **r,
            **{
                k: _iso(r[k])
                for k in ("fire_time", "started_at", "finished_at", "lease_until", "retry_at")
            },
        }
        for r in runs
    ]
    _emit(
        args,
        rows,
        [
            "id",
            "job_name",
            "fire_time",
            "kind",
            "status",
            "attempt",
            "claimed_by",
            "started_at",
            "finished_at",
            "orphan_count",
            "error",
        ],
        "runs",
    )
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        rows = [
            {
                **a,
                "handlers": ",".join(a["handlers"]),
                "last_seen": _iso(a["last_seen"]),
                "started_at": _iso(a["started_at"]),
            }
            for a in store.list_agents()
        ]
    finally:
        store.close()
    _emit(
        args,
        rows,
        [
            "agent_id",
            "alive",
            "durability",
            "hostname",
            "pod",
            "handlers",
            "version",
            "tzdata",
            "last_seen",
        ],
        "agents",
    )
    versions = sorted({str(a["tzdata"]) for a in rows if a["alive"] and a["tzdata"]})
    if len(versions) > 1:
        print(
            f"claimsched: warning: live agents compute fire times with different time zone "
            f"databases ({', '.join(versions)}): a local time may map to two instants and run "
            "twice; give every replica the same tzdata",
            file=sys.stderr,
        )
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        queued = store.request_runs(args.job, [store.db_now()], "manual")
    finally:
        store.close()
    if not queued:
        raise ClaimschedError(f"a run of {args.job} at this instant already exists")
    result = {"job": args.job, "fire_time": _iso(queued[0]), "status": "pending"}
    print(
        json.dumps(result)
        if args.json
        else f"triggered {args.job} (fire_time {result['fire_time']})"
    )
    return 0


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSpec(
            f"invalid time {text!r}: use ISO 8601, e.g. 2026-11-30T00:00:00Z"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def cmd_backfill(args: argparse.Namespace) -> int:
    start, end = _instant(args.start), _instant(args.end)
    if end <= start:
        raise InvalidSpec("backfill: TO must be after FROM")
    store = _store(args)
    try:
        now = store.db_now()
        if end > now:
            raise InvalidSpec(
                f"backfill: TO ({_iso(end)}) is in the future (database clock {_iso(now)}); "
                "occurrences still to come run at their time"
            )
        records = {r.job_name: r for r in store.load_schedules()}
        if args.job not in records:
            raise UnknownJob(f"no schedule for job {args.job!r}")
        record = records[args.job]
        occurrences = record.parsed.between(
            start - _tick(), end, limit=MAX_BACKFILL + 1
        )
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


def _tick() -> Any:
    from datetime import timedelta

    return timedelta(microseconds=1)


def cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 when the job's last due occurrence is healthy, 2 when not (1: could not tell)."""
    store = _store(args)
    try:
        found = summary(Views(store), args.job)  # the web view's reading of occurrences
    finally:
        store.close()
    if found is None:
        raise UnknownJob(f"no schedule for job {args.job!r}")
    if found.problem is not None:
        raise ClaimschedError(f"job {args.job}: {found.problem}")
    health = judge(found, found.window.now, args.late_after)
    print(json.dumps(health.json()) if args.json else health.line())
    return 0 if health.healthy else 2


def cmd_web(args: argparse.Namespace) -> int:
    logs.configure("INFO")
    return web.serve(_dsn(args), args.schema, args.bind)


def cmd_demo(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("rich") is None:
        raise ConfigurationError("the demo needs rich: pip install 'claimsched[demo]'")
    from .tools.demo.runner import run_demo  # rich and the demo load only for this command

    return run_demo(args)


# -- parser ------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    env = AgentSettings.fields
    top = argparse.ArgumentParser(
        prog="claimsched",
        description="Scheduled jobs that run exactly once across N replicas, on Postgres.",
    )
    top.add_argument("--version", action="version", version=f"claimsched {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dsn", help="PostgreSQL DSN (default: $CLAIMSCHED_DSN)")
    common.add_argument(
        "--schema",
        default=os.environ.get("CLAIMSCHED_SCHEMA", "claimsched"),
        help=env["schema_name"].description,
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument(
        "--connect-timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the database (default 5)",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, fn: Callable[[argparse.Namespace], int], text: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text, description=text)
        cmd.set_defaults(fn=fn)
        return cmd

    add("migrate", cmd_migrate, "create or upgrade claimsched's tables (idempotent)")
    add(
        "maintain", cmd_maintain, "create partitions ahead, drop history past retention"
    ).add_argument("--retention-days", type=int, default=90, help="keep this many days (90)")
    roles = add("roles", cmd_roles, "create or update the agents' and the operator's database "
                "roles: agents write only through fenced functions (run as the schema's owner, "
                "after migrate; idempotent)")
    roles.add_argument("--agent-role", default=AGENT_ROLE, metavar="NAME",
                       help=f"the apps' agents' role (default {AGENT_ROLE})")
    roles.add_argument("--operator-role", default=OPERATOR_ROLE, metavar="NAME",
                       help=f"the operator's and the CLI's role (default {OPERATOR_ROLE})")
    roles.epilog = ("No password is set: give one with ALTER ROLE <name> PASSWORD '...' (or log "
                    "in with certificates or your cloud's IAM). Run agents with "
                    "CLAIMSCHED_MIGRATE=false.")
    agent = add("agent", cmd_agent, "run the Agent found at MODULE:ATTR until SIGTERM")
    agent.add_argument("target", metavar="MODULE:ATTR")
    agent.formatter_class = argparse.RawDescriptionHelpFormatter
    agent.epilog = "settings (environment):\n" + "\n".join(
        f"  {field.alias or 'CLAIMSCHED_' + name.upper():36} {field.description}"
        for name, field in env.items()
    )
    add("apply", cmd_apply, "write the ClaimSchedules of a YAML file to the database").add_argument(
        "file", metavar="FILE.yaml"
    )
    add("schedules", cmd_schedules, "list schedules with their next fire times")
    runs = add("runs", cmd_runs, "list recent runs, newest first")
    runs.add_argument("--job")
    runs.add_argument(
        "--status", choices=["pending", "running", "done", "failed", "orphaned", "skipped"]
    )
    runs.add_argument("--limit", type=int, default=50)
    status = add("status", cmd_status, "did JOB's last due occurrence happen? One line; exit 0 "
                 "if healthy (done, running, skipped, due, suspended), 2 if not (failed, missed, "
                 "late, disabled): a health check")
    status.add_argument("job")
    status.add_argument("--late-after", type=int, default=LATE_AFTER_SECONDS, metavar="SECONDS",
                        help="an occurrence with no run started this long after its fire time "
                        f"is late (default {LATE_AFTER_SECONDS})")
    suspend = add("suspend", cmd_suspend, "suspend JOB: nothing that falls while suspended runs "
                  "or is caught up (a ClaimSchedule's job: use its spec.suspend)")
    suspend.add_argument("job")
    suspend.add_argument("--until", metavar="ISO", help="resume by itself at this instant "
                         "(ISO 8601, e.g. 2026-11-30T06:00:00Z; no zone: UTC)")
    suspend.add_argument("--reason", metavar="TEXT", help="why, for whoever looks (shown by "
                         "schedules, status and the web view)")
    add("resume", cmd_resume, "resume JOB from now on; what fell while suspended never runs"
        ).add_argument("job")
    add("agents", cmd_agents, "list agents and whether they are alive")
    add("trigger", cmd_trigger, "queue one manual run of JOB now").add_argument("job")
    backfill = add("backfill", cmd_backfill, "queue the occurrences of JOB between FROM and TO")
    backfill.add_argument("job")
    backfill.add_argument("start", metavar="FROM")
    backfill.add_argument("end", metavar="TO")
    add("web", cmd_web, "serve a read-only view of schedules, runs and agents (HTML, JSON)"
        ).add_argument("--bind", default="127.0.0.1:8080", metavar="HOST:PORT",
                       help="where to listen (default 127.0.0.1:8080: this machine only)")
    demo = add("demo", cmd_demo, "show exactly-once work: N replicas, a kill, a pause, a verdict")
    demo.add_argument(
        "--replicas", type=int, default=3, help="agent processes (default 3, at least 2)"
    )
    demo.add_argument(
        "--duration",
        type=float,
        default=30.0,
        help="seconds to run at least (default 30); it runs on until the kill "
        "and the pause have played out",
    )
    demo.add_argument(
        "--keep", type=float, nargs="?", const=0.0, default=None, metavar="SECONDS",
        help="after the verdict, print the embedded database's DSN and keep it up for "
        "`claimsched web` until Ctrl-C or SIGTERM (or SECONDS)",
    )
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    try:
        return int(args.fn(args))
    except ClaimschedError as exc:
        message = str(exc)
        if args.dsn:
            message = message.replace(args.dsn, redact_dsn(args.dsn))
        print(f"claimsched: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("claimsched: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
