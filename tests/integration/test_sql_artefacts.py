"""The SQL as an artefact: the committed sql/schema.sql is what a fresh migrate builds, and a
function file runs as it stands in psql (no template: the schema comes from the search_path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg

from claimsched.db import Store
from claimsched.db.snapshot import dump, pg_dump, schema_file

SQL = Path(__file__).resolve().parents[2] / "agent" / "claimsched" / "db" / "sql"
FUNCTIONS = SQL / "functions"


def test_a_fresh_migrate_builds_the_committed_schema_sql(empty_dsn: str) -> None:
    store = Store(empty_dsn)
    store.admin.migrate()
    fresh, committed = dump(empty_dsn), schema_file().read_text()
    assert fresh == committed, (
        "sql/schema.sql is not what a fresh migrate builds: after changing a migration or a "
        "function file, run `python -m claimsched.db.snapshot --dsn <a server's database>` "
        "and commit agent/claimsched/db/sql/schema.sql")


def test_a_function_file_runs_in_psql_and_keeps_the_search_path_it_was_made_with(
        dsn: str) -> None:
    psql = str(Path(pg_dump()).with_name("psql"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP FUNCTION claimsched.cs_api_callers(integer)")
    result = subprocess.run(
        [psql, "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--dbname", dsn,
         "-c", "SET search_path = claimsched, pg_catalog, pg_temp",
         "-f", str(FUNCTIONS / "cs_api_callers.sql"), "-f", str(FUNCTIONS / "_paths.sql")],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        (config,) = conn.execute(
            "SELECT proconfig FROM pg_proc WHERE oid = 'claimsched.cs_api_callers'::regproc"
        ).fetchone() or (None,)
        assert config == ["search_path=pg_catalog, claimsched, pg_temp"]
        assert conn.execute("SELECT * FROM claimsched.cs_api_callers(2)").fetchall() == []


def test_every_function_lives_in_claimscheds_schema_and_resolves_pg_catalog_first(
        dsn: str) -> None:
    """CREATE puts an unqualified function in the first schema of the search_path: none of
    claimsched's may land in pg_catalog (where every schema of the database would share it)."""
    names = [name.removesuffix(".sql") for name in
             (path.name for path in FUNCTIONS.glob("*.sql")) if not name.startswith(("_", "index"))]
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.proname, n.nspname, p.prosecdef, p.proconfig FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ANY(%s)",
            [names]).fetchall()
    assert {name for name, *_ in rows} == set(names)
    assert {schema for _, schema, *_ in rows} == {"claimsched"}
    for name, _, definer, config in rows:
        if definer:
            assert "search_path=pg_catalog, claimsched, pg_temp" in config, name
