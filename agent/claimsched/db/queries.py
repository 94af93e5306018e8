"""The statements of the sql/ files: named queries (sql/queries.sql: `-- name: x`, a description,
then the body), and calls of the functions of sql/functions/, made from their signatures."""

from __future__ import annotations

import re
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
def query(name: str) -> str | sql.Composed:
    """The named query, its spec column lists filled in where it has any."""
    text = queries()[name]
    if "{spec_" not in text:
        return text
    return sql.SQL(text).format(**SPEC_LISTS)


_FUNCTION = re.compile(r"^CREATE OR REPLACE FUNCTION (\w+)\(([^)]*)\)", re.MULTILINE)
_PARAMETER = re.compile(r"p_(\w+) ([a-z][a-z ]*[a-z](?:\[\])?)")  # p_jobs text[]


@cache
def parameters(function: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of each input parameter of sql/functions/<function>.sql, in order, the
    name without its `p_`: `p_jobs text[]` is ("jobs", "text[]"). ValueError for a parameter
    that is not `p_<name> <type>` (its OUT parameters are its result, not parameters)."""
    if not re.fullmatch(r"\w+", function):
        raise ValueError(f"no function {function!r}")
    found = _FUNCTION.search(sql_text(f"functions/{function}.sql"))
    if found is None or found[1] != function:
        raise ValueError(f"sql/functions/{function}.sql does not create {function}")
    declared = [" ".join(p.split()) for p in found[2].split(",") if p.strip()]
    inputs = [p for p in declared if not p.startswith("OUT ")]
    for each in inputs:
        if not _PARAMETER.fullmatch(each):
            raise ValueError(f"{function}: parameter {each!r} is not `p_<name> <type>`")
    return tuple((m[1], m[2]) for m in map(_PARAMETER.fullmatch, inputs) if m)


@cache
def call(function: str, schema: str | None = None) -> str:
    """The statement that calls the function `function` of sql/functions/ with its parameters:
    `SELECT * FROM function(%(name)s::type, ...)`, each parameter a placeholder named as the
    function names it (without `p_`) and cast to the type it declares (an array travels as the
    text of its literal: db/arrays.py). Made from the function's own signature, so that a
    statement which only forwards to a function is not written a second time in a .sql file.
    With `schema`, the function is named with it (a connection whose search_path is not ours)."""
    name = sql.Identifier(function) if schema is None else sql.Identifier(schema, function)
    arguments = sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Placeholder(param), sql.SQL(kind))  # `kind` matched _PARAMETER
        for param, kind in parameters(function))
    return sql.SQL("SELECT * FROM {}({})").format(name, arguments).as_string(None)


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
