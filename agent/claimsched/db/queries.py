"""Named queries loaded from sql/queries.sql: `-- name: x`, a description, then the body."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import LiteralString, cast


def _sql_text(name: str) -> str:
    return (resources.files("claimsched") / "sql" / name).read_text(encoding="utf-8")


@cache
def queries() -> dict[str, LiteralString]:
    found: dict[str, LiteralString] = {}
    name: str | None = None
    body: list[str] = []
    for line in _sql_text("queries.sql").splitlines():
        if line.startswith("-- name:"):
            if name:
                found[name] = cast(LiteralString, "\n".join(body).strip())
            name, body = line.removeprefix("-- name:").strip(), []
        elif name and not line.startswith("--"):
            body.append(line)
    if name:
        found[name] = cast(LiteralString, "\n".join(body).strip())
    return found


def query(name: str) -> LiteralString:
    return queries()[name]


def schema_sql() -> LiteralString:
    return cast(LiteralString, _sql_text("schema.sql"))


def migration_files() -> list[tuple[int, str, LiteralString]]:
    """(version, file name, SQL) of every migration, in order."""
    folder = resources.files("claimsched") / "sql" / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, cast(LiteralString, entry.read_text("utf-8"))))
    return sorted(found)
