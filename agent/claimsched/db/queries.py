"""Named queries loaded from sql/queries.sql: `-- name: x`, a description, then the body."""

from __future__ import annotations

from functools import cache
from importlib import resources

from psycopg import sql

from ..schedule.specs import SPEC_COLUMNS, SUSPENSION_COLUMNS

#: Placeholders a query may use for the columns a schedule's spec writes (JobSpec's fields but
#: the job name), so that the list is written once, in specs.py, and never drifts:
#: {spec_columns} the column names, {spec_values} their %(name)s parameters, {spec_excluded}
#: and {spec_current} the same columns of EXCLUDED and of the row `s`; {spec_upserted} those of
#: EXCLUDED, but a code declaration keeps its own row's suspension (SUSPENSION_COLUMNS);
#: {spec_fields} those of the record `spec`.


def _upserted(column: str) -> sql.Composable:
    new = sql.Identifier("excluded", column)
    if column not in SUSPENSION_COLUMNS:
        return new
    return sql.SQL(
        "CASE WHEN excluded.source = 'code' AND s.source = 'code' THEN {} ELSE {} END"
    ).format(sql.Identifier("s", column), new)


SPEC_LISTS = {
    "spec_columns": sql.SQL(", ").join(map(sql.Identifier, SPEC_COLUMNS)),
    "spec_values": sql.SQL(", ").join(map(sql.Placeholder, SPEC_COLUMNS)),
    "spec_excluded": sql.SQL(", ").join(sql.Identifier("excluded", c) for c in SPEC_COLUMNS),
    "spec_current": sql.SQL(", ").join(sql.Identifier("s", c) for c in SPEC_COLUMNS),
    "spec_upserted": sql.SQL(", ").join(map(_upserted, SPEC_COLUMNS)),
    "spec_fields": sql.SQL(", ").join(sql.Identifier("spec", c) for c in SPEC_COLUMNS),
}


def sql_text(name: str) -> str:
    return (resources.files("claimsched.db") / "sql" / name).read_text(encoding="utf-8")


QUERY_FILES = ("queries.sql", "operator.sql", "views.sql")


@cache
def queries() -> dict[str, str]:
    """Every named query of sql/queries.sql (agent, CLI), sql/operator.sql (operator) and
    sql/views.sql (the web view)."""
    found: dict[str, str] = {}
    for file_name in QUERY_FILES:
        name: str | None = None
        body: list[str] = []
        for line in [*sql_text(file_name).splitlines(), "-- name: <end>"]:
            if line.startswith("-- name:"):
                if name:
                    if name in found:
                        raise RuntimeError(f"query {name!r} is defined twice")
                    found[name] = "\n".join(body).strip()
                name, body = line.removeprefix("-- name:").strip(), []
            elif name and not line.startswith("--"):
                body.append(line)
    return found


@cache
def query(name: str, schema: str | None = None) -> str | sql.Composed:
    """The named query, its spec column lists filled in where it has any, and `{schema}` with
    claimsched's schema, quoted, for a statement on a connection whose search_path is not ours."""
    text = queries()[name]
    if schema is not None:
        return sql.SQL(text).format(schema=sql.Identifier(schema))
    if "{spec_" not in text:
        return text
    return sql.SQL(text).format(**SPEC_LISTS)


def function_files() -> list[tuple[str, str]]:
    """(file name, SQL) of sql/functions/, in the order of its index.sql's `\\ir` lines (each
    function after those it calls). No file names the schema: run them with the search_path
    `<schema>, pg_catalog, pg_temp` (migrations.apply_functions does)."""
    folder = resources.files("claimsched.db") / "sql" / "functions"
    names = [line.removeprefix("\\ir ").strip()
             for line in (folder / "index.sql").read_text("utf-8").splitlines()
             if line.startswith("\\ir ")]
    return [(name, (folder / name).read_text("utf-8")) for name in names]


def migration_files() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration, in order."""
    folder = resources.files("claimsched.db") / "sql" / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text("utf-8")))
    return sorted(found)
