"""What every command shares: the common options, the store it opens, time and table output."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from .. import tables
from ..db import Store
from ..errors import ClaimschedError, ConfigurationError, InvalidSpec

#: A command: runs with the parsed arguments, returns the exit code.
Command = Callable[[argparse.Namespace], int]


class Add(Protocol):
    """Adds the subcommand `name` (running `fn`, described by `text`) and returns its parser."""

    def __call__(self, name: str, fn: Command, text: str) -> argparse.ArgumentParser: ...


def dsn(args: argparse.Namespace) -> str:
    found: str | None = args.dsn or os.environ.get("CLAIMSCHED_DSN")
    if not found:
        raise ConfigurationError("no database: pass --dsn or set CLAIMSCHED_DSN")
    return found


def open_store(args: argparse.Namespace, *, check: bool = True) -> Store:
    store = Store(dsn(args), schema=args.schema, max_size=2, name="claimsched-cli")
    store.open(timeout=args.connect_timeout)
    if check:  # never read or write a schema this code does not understand
        try:
            store.admin.check_version()
        except ClaimschedError:
            store.close()
            raise
    return store


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSpec(
            f"invalid time {text!r}: use ISO 8601, e.g. 2026-11-30T00:00:00Z"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def emit(
    args: argparse.Namespace, rows: list[dict[str, Any]], columns: Sequence[str], title: str,
    *, wide: Sequence[str] = (), times: Sequence[str] = (),
) -> None:
    """Rows as `-o` asks: a kubectl-style table of `columns` (the `times` among them as ages),
    `-o wide` with the `wide` columns too and times in full, `-o json` (or --json), `-o yaml`."""
    output = "json" if args.json else args.output
    if output == "json":
        print(json.dumps(rows, default=str, indent=2))
    elif output == "yaml":
        import yaml  # not loaded by every replica's CLI

        print(yaml.safe_dump(json.loads(json.dumps(rows, default=str)), sort_keys=False,
                             allow_unicode=True), end="")
    elif output == "wide":
        print(tables.listing([*columns, *wide], rows, title, datetime.now(UTC)))
    else:
        print(tables.listing(columns, rows, title, datetime.now(UTC), times))
