"""The `claimsched` command: migrate, run an agent, apply schedules, inspect runs, trigger.

Each module holds the commands of one noun and a `register(add)` that adds their parsers;
COMMANDS lists those functions in the order `claimsched --help` shows the commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from ..db import redact_dsn
from ..errors import ClaimschedError
from ..settings import AgentSettings
from ..version import __version__
from . import agent, agents, database, launch, queueing, runs, schedules, suspension
from .common import Add, Command

COMMANDS: tuple[Callable[[Add], None], ...] = (
    database.register,
    agent.register,
    schedules.register,
    runs.register,
    suspension.register,
    agents.register,
    queueing.register,
    launch.register,
)

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
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
        help=AgentSettings.fields["schema_name"].description,
    )
    common.add_argument("--json", action="store_true", help="machine-readable output (-o json)")
    common.add_argument("-o", "--output", choices=["table", "wide", "json", "yaml"],
                        default="table", help="listings: a table (times as ages), wide (more "
                        "columns, times in full), json or yaml")
    common.add_argument(
        "--connect-timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the database (default 5)",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Command, text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text, description=text)
        cmd.set_defaults(fn=fn)
        return cmd

    for register in COMMANDS:
        register(add)
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
