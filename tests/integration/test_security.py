"""Security on a real database: injection strings travel as data, the agent needs no DDL
rights, and secrets never reach logs or command output (the proof that every statement is
parameterized needs no database: tests/unit/test_sql_safety.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from bench.chaos import app_sql
from bench.chaos.harness import APP
from psycopg import errors as pgerrors
from psycopg import sql as pgsql

from claimsched import Agent, Run
from claimsched.db import Roles, Store
from claimsched.tools.postgres import TemporaryPostgres
from claimsched.tools.processes import python_path, spawn_agent, stop_process
from tests.helpers.polling import wait_for

from .support import runs

REPO = Path(__file__).resolve().parents[2]

INJECTED = "'; DELETE FROM job_runs; -- "  # data, never run


def test_injection_strings_travel_as_data(store: Store, dsn: str) -> None:
    from claimsched.schedule.specs import job_spec

    store.schedules.upsert(job_spec(job_name="j", schedule="@daily"))
    assert len(store.listings.request_runs("j", [store.db_now()], "manual")) == 1
    agent = Agent(dsn, agent_id="a'); DROP TABLE agents; --", housekeeping_seconds=0.3)
    nasty = "x'); DROP TABLE job_effects; --"

    @agent.job("j")
    def handler(run: Run) -> None:
        assert run.effect(nasty)
        raise ValueError(INJECTED + nasty)

    with agent:
        wait_for(lambda: runs(dsn, "j")[0]["status"] == "failed", what="the failed run")
    (row,) = runs(dsn, "j")
    assert row["claimed_by"] == "a'); DROP TABLE agents; --"
    assert row["error"] == "ValueError: " + INJECTED + nasty
    with psycopg.connect(dsn) as conn:
        entities = conn.execute("SELECT entity FROM claimsched.job_effects").fetchall()
        agents = conn.execute("SELECT agent_id FROM claimsched.agents").fetchall()
    assert entities == [(nasty,)] and agents == [("a'); DROP TABLE agents; --",)]


# -- a role with a password, and one without DDL rights --------------------------------------------


@dataclass
class PasswordRole:
    user: str
    password: str
    host: str
    port: int

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"


def _add_password_login(admin_dsn: str, user: str, password: str) -> tuple[Path, str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(user)))
        conn.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                pgsql.Identifier(user), pgsql.Literal(password)
            )
        )
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
        original = hba.read_text()
        hba.write_text(
            f"host all {user} 127.0.0.1/32 scram-sha-256\n"
            f"local all {user} scram-sha-256\n" + original
        )
        conn.execute("SELECT pg_reload_conf()")
    return hba, original


def _drop_role(admin_dsn: str, user: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        databases = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate"
            )
        ]
    role = pgsql.Identifier(user)
    for database in databases:
        target = psycopg.conninfo.make_conninfo(admin_dsn, dbname=database)
        try:
            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute(pgsql.SQL("DROP OWNED BY {}").format(role))
        except psycopg.Error:
            pass
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(role))


@pytest.fixture
def password_role(server_dsn: str) -> Iterator[PasswordRole]:
    """A login role that must give its password (scram), on the session's server."""
    user, password = f"app_{os.getpid()}", "S3cr3t-Pa55-Zq9"
    hba, original = _add_password_login(server_dsn, user, password)
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    try:
        yield PasswordRole(user, password, str(info["host"]), int(str(info["port"])))
    finally:
        hba.write_text(original)
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        _drop_role(server_dsn, user)
        _drop_role(server_dsn, f"{user}_operator")


def _grant_app_rights(admin_dsn: str, user: str) -> None:
    """What an app role needs: `claimsched roles` makes it the agents' role (no DDL, no table
    writes: every write through claimsched's functions)."""
    Store(admin_dsn).admin.grant_roles(Roles(agent=user, operator=f"{user}_operator"))
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(pgsql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))


def test_the_agent_runs_with_a_role_that_has_no_ddl_rights(
    dsn: str, password_role: PasswordRole, capsys: pytest.CaptureFixture[str]
) -> None:
    from claimsched.cli import main
    from claimsched.schedule.specs import job_spec

    _grant_app_rights(dsn, password_role.user)
    database = str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
    app_dsn = password_role.dsn(database)
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        for ddl in (
            "CREATE TABLE claimsched.x (a int)",
            "CREATE TABLE public.x (a int)",
            "CREATE SCHEMA evil",
            "DROP TABLE claimsched.job_runs",
            "ALTER TABLE claimsched.job_runs ADD COLUMN y int",
            "DELETE FROM claimsched.job_runs",
        ):
            with pytest.raises(pgerrors.InsufficientPrivilege):
                conn.execute(ddl)
    store = Store(dsn)
    try:
        store.schedules.upsert(
            job_spec(
                job_name="tick",
                schedule="@every 1s",
                lease_seconds=3,
                heartbeat_seconds=1,
                source="cli",
            )
        )
    finally:
        store.close()
    done: list[bool] = []
    agent = Agent(
        app_dsn, agent_id="least-privilege", housekeeping_seconds=0.3, shutdown_grace_seconds=1
    )  # migrate=True by default: it must not need to

    @agent.job("tick")
    def tick(run: Run) -> None:
        done.append(run.effect("report"))
        time.sleep(0.2)

    @agent.job("slow", schedule="@every 2s", lease_seconds=3, heartbeat_seconds=1)
    def slow(run: Run) -> None:
        time.sleep(1.5)  # long enough for heartbeats

    with agent:
        wait_for(lambda: sum(done) >= 3, what="three runs with effects")
        wait_for(lambda: any(r["status"] == "done" for r in runs(dsn, "slow")), what="a slow run")
    statuses = {r["status"] for r in runs(dsn, "tick")}
    assert statuses <= {"done", "skipped"} and "done" in statuses
    code, _, err = cli_migrate(main, capsys, app_dsn)
    assert code == 1 and "permission denied" in err and err.count("\n") == 1
    assert password_role.password not in err


def cli_migrate(main, capsys, dsn: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(["migrate", "--dsn", dsn, "--schema", "elsewhere"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- secrets never reach logs or command output ----------------------------------------------------

SECRET = "Hush-7x!Q@pw"  # characters that need URI escaping, like real generated passwords


@pytest.fixture(scope="module")
def secret_server() -> Iterator[tuple[TemporaryPostgres, str, str]]:
    """A dedicated server (it gets restarted) where role `app` logs in with SECRET."""
    pg = TemporaryPostgres()
    pg.init()
    hba = pg.data / "pg_hba.conf"
    hba.write_text("host all app 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    pg.start()
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(
                pgsql.SQL("CREATE ROLE app LOGIN SUPERUSER PASSWORD {}").format(
                    pgsql.Literal(SECRET)
                )
            )
        from urllib.parse import quote

        uri = f"postgresql://app:{quote(SECRET, safe='')}@127.0.0.1:{pg.port}/postgres"
        keywords = f"host=127.0.0.1 port={pg.port} dbname=postgres user=app password='{SECRET}'"
        Store(uri).admin.migrate()
        yield pg, uri, keywords
    finally:
        pg.destroy()


def _leaks(text: str) -> list[str]:
    from urllib.parse import quote

    return [s for s in (SECRET, quote(SECRET, safe=""), SECRET[:8]) if s in text]


@pytest.mark.parametrize("form", ["uri", "keywords"])
def test_agent_logs_never_show_the_password_even_through_an_outage(
    secret_server: tuple[TemporaryPostgres, str, str],
    caplog: pytest.LogCaptureFixture,
    form: str,
) -> None:
    pg, uri, keywords = secret_server
    dsn = uri if form == "uri" else keywords
    agent = Agent(dsn, agent_id=f"secretive-{form}", housekeeping_seconds=0.3,
                  shutdown_grace_seconds=1)
    ran: list[int] = []

    @agent.job(f"tick-{form}", schedule="@every 1s", lease_seconds=3, heartbeat_seconds=1)
    def tick(run: Run) -> None:
        ran.append(run.attempt)
        raise RuntimeError(f"failed while talking to {run.job_name}")

    with caplog.at_level(logging.DEBUG), agent:
        wait_for(lambda: len(ran) >= 2, what="runs")
        pg.restart("fast")
        wait_for(
            lambda: "database unavailable" in caplog.text and len(ran) >= 4,
            timeout=30,
            what="the outage to be logged and runs to resume",
        )
    text = caplog.text + repr(agent.settings) + repr(agent.store) + str(agent.settings)
    assert _leaks(text) == [], text[-2000:]


def test_command_output_and_errors_never_show_the_password(
    secret_server: tuple[TemporaryPostgres, str, str],
) -> None:
    pg, uri, keywords = secret_server
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}

    def claimsched(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "claimsched.cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, **extra},
        )

    outputs = []
    for dsn in (uri, keywords):
        for command in (
            ["migrate", "--json"],
            ["schedules", "--json"],
            ["runs", "--json"],
            ["agents", "--json"],
            ["maintain", "--json"],
            ["trigger", "nope"],
        ):
            outputs.append(claimsched(*command, "--dsn", dsn))
            outputs.append(claimsched(*command, CLAIMSCHED_DSN=dsn))
        broken = dsn.replace("/postgres", "/no_such_db").replace(
            "dbname=postgres", "dbname=no_such_db"
        )
        outputs.append(claimsched("runs", "--json", "--dsn", broken))
        unreachable = dsn.replace(str(pg.port), "1")
        outputs.append(claimsched("runs", "--dsn", unreachable, "--connect-timeout", "1"))
        outputs.append(claimsched("agent", "no.such.module:agent", CLAIMSCHED_DSN=dsn))
    assert [o.returncode for o in outputs].count(0) >= 10
    assert any("does not exist" in o.stderr for o in outputs)
    for result in outputs:
        assert _leaks(result.stdout + result.stderr) == [], (result.args, result.stderr)
    json.loads(outputs[0].stdout)


def test_an_agent_process_at_debug_level_never_logs_the_password(
    secret_server: tuple[TemporaryPostgres, str, str], tmp_path: Path
) -> None:
    pg, uri, _ = secret_server
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(app_sql.LEDGER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
    env.update(
        {
            "CLAIMSCHED_DSN": uri,
            "CLAIMSCHED_LOG_LEVEL": "DEBUG",
            "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.3",
            "PYTHONPATH": python_path(REPO),
            "APP_JOBS": json.dumps(
                [
                    {
                        "name": "proc",
                        "schedule": "@every 1s",
                        "after": "x",
                        "lease_seconds": 3,
                        "heartbeat_seconds": 1,
                    }
                ]
            ),
        }
    )
    log = tmp_path / "agent.log"
    process = spawn_agent(APP, env, log, cwd=REPO)
    try:
        wait_for(lambda: "run done" in log.read_text(), timeout=30, what="a run")
        pg.restart("fast")
        wait_for(lambda: log.read_text().count("run done") >= 3, timeout=30, what="more runs")
    finally:
        stop_process(process, 20)
    text = log.read_text()
    assert "database unavailable" in text and "agent stopped" in text
    assert _leaks(text) == [], text[-2000:]


def test_migrate_and_roles_refuse_a_schema_where_another_role_may_create(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whoever may CREATE in claimsched's schema could put a function or a table where its
    SECURITY DEFINER functions look: migrate and roles name them and say how to fix it."""
    from claimsched.cli import main

    intruder = f"intruder_{os.getpid()}"

    def admin(statement: str) -> None:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(statement)

    admin("CREATE SCHEMA shared; GRANT CREATE ON SCHEMA shared TO PUBLIC")
    capsys.readouterr()
    assert main(["migrate", "--schema", "shared", "--dsn", empty_dsn]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "schema shared: PUBLIC may CREATE in it" in err
    assert 'REVOKE CREATE ON SCHEMA "shared" FROM PUBLIC' in err
    with psycopg.connect(empty_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'shared'")
        assert tables.fetchone() == (0,)
    admin("REVOKE CREATE ON SCHEMA shared FROM PUBLIC")
    assert main(["migrate", "--schema", "shared", "--dsn", empty_dsn]) == 0
    admin(f"CREATE ROLE {intruder}; GRANT CREATE ON SCHEMA shared TO {intruder}")
    try:
        capsys.readouterr()
        assert main(["roles", "--schema", "shared", "--dsn", empty_dsn]) == 1
        assert f"schema shared: {intruder} may CREATE in it" in capsys.readouterr().err
    finally:
        admin(f"DROP OWNED BY {intruder}; DROP ROLE {intruder}")
