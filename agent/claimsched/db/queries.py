"""Named queries loaded from sql/queries.sql: `-- name: x`, a description, then the body."""

from __future__ import annotations

from functools import cache
from importlib import resources


def _sql_text(name: str) -> str:
    return (resources.files("claimsched") / "sql" / name).read_text(encoding="utf-8")


QUERY_FILES = ("queries.sql", "operator.sql", "views.sql")


@cache
def queries() -> dict[str, str]:
    """Every named query of sql/queries.sql (agent, CLI), sql/operator.sql (operator) and
    sql/views.sql (the web view)."""
    found: dict[str, str] = {}
    for file_name in QUERY_FILES:
        name: str | None = None
        body: list[str] = []
        for line in [*_sql_text(file_name).splitlines(), "-- name: <end>"]:
            if line.startswith("-- name:"):
                if name:
                    if name in found:
                        raise RuntimeError(f"query {name!r} is defined twice")
                    found[name] = "\n".join(body).strip()
                name, body = line.removeprefix("-- name:").strip(), []
            elif name and not line.startswith("--"):
                body.append(line)
    return found


def query(name: str) -> str:
    return queries()[name]


def schema_sql() -> str:
    return _sql_text("schema.sql")


def migration_files() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration, in order."""
    folder = resources.files("claimsched") / "sql" / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text("utf-8")))
    return sorted(found)
