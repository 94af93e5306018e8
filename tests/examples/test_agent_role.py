"""The agent role of `claimsched roles` runs the example app's agent end to end on a real
Postgres (claims, completions, receipts, presence, a code declaration: all through the
functions), and cannot change claimsched's schema."""

from __future__ import annotations

import itertools
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from claimsched.db import Store
from claimsched.tools.processes import python_path, stop_process
from tests.helpers.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
APP_DIR = REPO / "examples" / "app"
APP_SCHEMA_SQL = APP_DIR / "schema.sql"
REMINDERS = REPO / "examples" / "claimschedules" / "invoice-reminders.yaml"
_counter = itertools.count()


def execute(dsn: str, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def roles(dsn: str, role: str) -> list[str]:
    """`claimsched roles` for this test's roles (roles are server-wide: each test has its own)."""
    return ["roles", "--agent-role", role, "--operator-role", f"{role}_op", "--dsn", dsn]


@pytest.fixture
def agent_role(dsn: str) -> Iterator[tuple[str, str]]:
    """(role name, the role's DSN): `claimsched roles` and the app's schema applied by the
    owner (the app's file names the role claimsched_agent)."""
    role = f"claimsched_agent_{os.getpid()}_{next(_counter)}"
    password = secrets.token_hex(12)
    cli(*roles(dsn, role))
    execute(dsn, APP_SCHEMA_SQL.read_text().replace("claimsched_agent", role))
    execute(dsn, sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                             sql.Literal(password)))
    role_dsn = psycopg.conninfo.make_conninfo(dsn, user=role, password=password)
    yield role, role_dsn
    for name in (role, f"{role}_op"):
        execute(dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        execute(dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "claimsched.cli", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_roles_command_is_idempotent(dsn: str, agent_role: tuple[str, str]) -> None:
    role, _ = agent_role
    cli(*roles(dsn, role))
    assert "ALTER ROLE" in cli(*roles(dsn, role))


def test_example_app_runs_with_the_least_privilege_role(
        dsn: str, agent_role: tuple[str, str], tmp_path: Path) -> None:
    role, role_dsn = agent_role
    # The owner's part: shop data, and the ClaimSchedule of invoice-reminders (as the operator
    # would write it), plus one manual run of it.
    execute(dsn, """
        INSERT INTO shop.invoices VALUES
            (1, 'ada@example.com', current_date - 10, NULL),
            (2, 'bob@example.com', current_date - 3, NULL),
            (3, 'cyd@example.com', current_date - 3, now()),
            (4, 'dan@example.com', current_date + 10, NULL);
        INSERT INTO shop.carts (id, status, updated_at) VALUES
            (10, 'open', now() - interval '2 hours'),
            (11, 'open', now() - interval '45 minutes'),
            (12, 'open', now()),
            (13, 'ordered', now() - interval '2 hours');
    """)
    cli("apply", str(REMINDERS), "--dsn", dsn)
    cli("trigger", "invoice-reminders", "--dsn", dsn)

    log = tmp_path / "agent.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAIMSCHED_", "APP_"))}
    env.update({
        "CLAIMSCHED_DSN": role_dsn,
        "CLAIMSCHED_MIGRATE": "false",
        "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",
        "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": "5",
        "EXPIRE_CARTS_SCHEDULE": "@every 2s",
        "POD_NAME": "shop-worker-0",
        "POD_NAMESPACE": "shop",
        "PYTHONPATH": python_path(APP_DIR, REPO),
    })
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "claimsched.cli", "agent", "app:agent"],
            env=env, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT)
    try:
        def done(job: str) -> list[tuple[Any, ...]]:
            assert process.poll() is None, log.read_text()
            return execute(dsn, "SELECT id FROM claimsched.job_runs "
                                "WHERE job_name = %s AND status = 'done'", [job])

        wait_for(lambda: done("invoice-reminders"), timeout=30, what="the manual run")
        wait_for(lambda: done("expire-carts"), timeout=30, what="an expire-carts run")
        wait_for(lambda: len(done("expire-carts")) >= 2, timeout=30, what="a second sweep")
    finally:
        stop_process(process, 20)
    output = log.read_text()
    assert process.returncode == 0, output
    assert "permission denied" not in output.lower(), output

    # One reminder per overdue unpaid invoice, each with its receipt; nothing else.
    outbox = execute(dsn, "SELECT recipient FROM shop.outbox ORDER BY recipient")
    assert outbox == [("ada@example.com",), ("bob@example.com",)]
    receipts = execute(dsn, "SELECT entity, job_name FROM claimsched.job_effects ORDER BY 1")
    assert ("invoice-reminder:1", "invoice-reminders") in receipts
    assert ("invoice-reminder:2", "invoice-reminders") in receipts
    # The stale carts expired exactly once, each under one receipt, whatever the sweeps.
    carts = dict(execute(dsn, "SELECT id, status FROM shop.carts"))
    assert carts == {10: "expired", 11: "expired", 12: "open", 13: "ordered"}
    expired = [e for e, j in receipts if j == "expire-carts"]
    assert sorted(expired) == ["cart-expired:10", "cart-expired:11"]
    # The agent declared its code schedule and its presence with the role's rights.
    assert execute(dsn, "SELECT source FROM claimsched.job_schedule "
                        "WHERE job_name = 'expire-carts'") == [("code",)]
    assert execute(dsn, "SELECT pod, namespace, stopped_at IS NOT NULL FROM claimsched.agents") \
        == [("shop-worker-0", "shop", True)]
    assert execute(dsn, "SELECT tableowner FROM pg_tables WHERE schemaname = 'claimsched' "
                        "AND tableowner = %s", [role]) == []


FORBIDDEN = [
    "DROP TABLE claimsched.job_runs",
    "DROP TABLE claimsched.job_effects",
    "ALTER TABLE claimsched.job_schedule ADD COLUMN sneaky text",
    "ALTER TABLE claimsched.job_runs DROP CONSTRAINT job_runs_job_name_fire_time_key",
    "CREATE TABLE claimsched.sneaky (id int)",
    "CREATE INDEX sneaky ON claimsched.job_runs (status)",
    "TRUNCATE claimsched.job_effects",
    "DELETE FROM claimsched.job_runs",
    "DELETE FROM claimsched.job_effects",
    "DROP SCHEMA claimsched CASCADE",
    "CREATE SCHEMA sneaky",
    "ALTER TABLE shop.outbox ADD COLUMN sneaky text",
    "DROP TABLE shop.outbox",
]


@pytest.mark.parametrize("statement", FORBIDDEN)
def test_agent_role_cannot_change_the_schema(agent_role: tuple[str, str], statement: str) -> None:
    _, role_dsn = agent_role
    with pytest.raises(errors.InsufficientPrivilege):
        execute(role_dsn, statement)


def test_agent_role_cannot_migrate_or_maintain(dsn: str, agent_role: tuple[str, str]) -> None:
    _, role_dsn = agent_role
    # An empty schema next door: migrating it needs DDL rights the role does not have.
    store = Store(role_dsn, schema="claimsched_other")
    store.open()
    try:
        with pytest.raises(Exception) as caught:
            store.admin.migrate()
        assert "permission denied" in str(caught.value).lower()
        assert execute(dsn, "SELECT 1 FROM pg_namespace WHERE nspname = 'claimsched_other'") == []
    finally:
        store.close()
    with pytest.raises(errors.InsufficientPrivilege):
        # maintenance creates partitions (DDL) and deletes history
        execute(role_dsn, "CREATE TABLE claimsched.job_runs_2999_01 PARTITION OF "
                          "claimsched.job_runs FOR VALUES FROM ('2999-01-01') TO ('2999-02-01')")
