"""sql/schema.sql: the whole current schema (tables, constraints, indexes, triggers, functions,
policies) as a fresh `claimsched migrate` leaves it, in schema `claimsched`, for reading.

Regenerate it after changing a migration or a function file::

    python -m claimsched.db.snapshot --dsn postgresql://.../postgres

(`--dsn`: any database of a server where the caller may CREATE DATABASE; a throwaway one is
created, migrated, dumped with the server's pg_dump and dropped.) tests/integration/
test_sql_artefacts.py holds a fresh migrate equal to the committed file.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import uuid
from importlib import resources
from pathlib import Path

import psycopg
from psycopg import sql

from .connection import connect
from .migrations import migrate

SCHEMA = "claimsched"
_HEADER = ("-- claimsched's schema as a fresh `claimsched migrate` leaves it (monthly job_runs\n"
           "-- partitions left out). Generated: python -m claimsched.db.snapshot --dsn ...\n"
           "-- Read it; never apply it: migrate builds the schema.\n")


def schema_file() -> Path:
    return Path(str(resources.files("claimsched.db") / "sql" / "schema.sql"))


def pg_dump() -> str:
    """The pg_dump of PG_BINDIR, of PATH, or the newest of /usr/lib/postgresql."""
    candidates = [os.environ.get("PG_BINDIR", ""), *[str(Path(p).parent) for p in
                  [shutil.which("pg_dump") or ""] if p],
                  *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if folder and (Path(folder) / "pg_dump").exists():
            return str(Path(folder) / "pg_dump")
    raise FileNotFoundError("no pg_dump found: set PG_BINDIR to PostgreSQL's bin directory")


def dump(dsn: str, schema: str = SCHEMA) -> str:
    """The normalised schema-only dump of `schema` in database `dsn`: no comments, SET lines,
    owners, privileges or monthly partitions; blank lines collapsed."""
    text = subprocess.run(
        [pg_dump(), "--schema-only", "--no-owner", "--no-privileges", "--no-comments",
         f"--schema={schema}", f"--exclude-table={schema}.job_runs_p[0-9]*", "--dbname", dsn],
        check=True, capture_output=True, text=True).stdout
    kept = [line.rstrip() for line in text.splitlines()
            if not line.startswith(("--", "SET ", "SELECT pg_catalog.set_config", "\\"))]
    return _HEADER + "\n" + re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"


def fresh_dump(server_dsn: str) -> str:
    """Migrate schema `claimsched` of a new database on the server of `server_dsn`, dump it,
    drop the database."""
    name = f"claimsched_snapshot_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
        with connect(dsn, SCHEMA, autocommit=True) as conn:
            migrate(conn, SCHEMA)
        return dump(dsn)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dsn", required=True, help="a database of a server where you may "
                        "CREATE DATABASE (a throwaway one is made there)")
    args = parser.parse_args(argv)
    schema_file().write_text(fresh_dump(args.dsn), encoding="utf-8")
    print(f"wrote {schema_file()}")


if __name__ == "__main__":
    main()
