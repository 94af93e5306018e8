"""Security: every SQL statement is parameterized, the agent needs no DDL rights, and secrets
never reach logs or command output."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import sql as pgsql

from claimsched import Agent, Run
from claimsched.db import Store
from claimsched.embedded import TemporaryPostgres
from claimsched.processes import spawn_agent
from tests.chaos.harness import CHILD_PYTHONPATH

from .support import runs, wait_for

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "agent" / "claimsched", REPO / "operator" / "claimsched_operator"]

# -- every statement is parameterized: an AST proof over agent/ and operator/ --------------------

EXECUTORS = {"execute", "executemany", "copy", "stream"}
SAFE_CALLS = {"query", "schema_sql"}  # statements read from the packaged, reviewed .sql files
SAFE_ITERATORS = {"migration_files"}  # (version, file name, SQL text) of packaged migrations
COMPOSABLES = {"SQL", "Identifier", "Literal", "Placeholder", "Composed"}


class SqlSafety:
    """Decides, for each `.execute(statement, ...)`, whether `statement` can only be SQL the
    project wrote: a string constant, a named query from the .sql files, or a psycopg.sql
    composition of constants, identifiers and literals. Anything built from runtime values with
    an f-string, `%`, `+` or `str.format` is a finding. Names are followed to their
    assignments in the function and the module, and into sibling modules they come from."""

    def __init__(self, files: dict[str, str]) -> None:
        self.trees = {name: ast.parse(text) for name, text in files.items()}
        self.calls = 0

    def findings(self) -> list[str]:
        found = []
        for module, tree in self.trees.items():
            for scope in [tree, *[n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)]]:
                for node in _own_nodes(scope):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr in EXECUTORS
                        and node.args
                    ):
                        self.calls += 1
                        if not self.safe(node.args[0], module, scope, 0):
                            found.append(f"{module}:{node.lineno}: {ast.unparse(node.args[0])}")
        return found

    # statement positions: strings the project wrote, or compositions of them
    def safe(self, node: ast.AST, module: str, scope: ast.AST, depth: int) -> bool:
        if depth > 12:
            return False
        if self.constant_text(node, module, scope, depth):
            return True
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in SAFE_CALLS:
                return True
            return self.composable(node, module, scope, depth)
        if isinstance(node, ast.IfExp):
            return self.safe(node.body, module, scope, depth + 1) and self.safe(
                node.orelse, module, scope, depth + 1
            )
        if isinstance(node, ast.Name):
            if self._iterated(node.id, scope):
                return True
            return self._bound_safely(node.id, module, scope, depth, self.safe)
        if isinstance(node, ast.Attribute):
            return self._imported(node, module, depth, self.safe)
        return False

    def composable(self, node: ast.AST, module: str, scope: ast.AST, depth: int) -> bool:
        if isinstance(node, ast.Name):
            return self._bound_safely(node.id, module, scope, depth, self.composable)
        if isinstance(node, ast.Attribute):
            return self._imported(node, module, depth, self.composable)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "SQL":  # the only composable whose text is trusted verbatim
            return len(node.args) == 1 and self.constant_text(node.args[0], module, scope, depth)
        if name in COMPOSABLES:  # identifiers and literals are quoted by psycopg
            return True
        if isinstance(func, ast.Attribute) and name in {"format", "join"}:
            return self.composable(func.value, module, scope, depth + 1)
        return False

    def constant_text(self, node: ast.AST, module: str, scope: ast.AST, depth: int) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if isinstance(node, ast.JoinedStr):
            return all(isinstance(v, ast.Constant) for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.constant_text(node.left, module, scope, depth + 1) and self.constant_text(
                node.right, module, scope, depth + 1
            )
        if isinstance(node, ast.Name) and depth < 12:
            return self._bound_safely(node.id, module, scope, depth, self.constant_text)
        if isinstance(node, ast.Attribute) and depth < 12:
            return self._imported(node, module, depth, self.constant_text)
        return False

    def _iterated(self, name: str, scope: ast.AST) -> bool:
        for node in _own_nodes(scope):
            if isinstance(node, ast.For) and name in _names(node.target):
                call = node.iter
                return (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id in SAFE_ITERATORS
                )
        return False

    def _bound_safely(self, name: str, module: str, scope: ast.AST, depth: int, check) -> bool:  # type: ignore[no-untyped-def]
        tree = self.trees[module]
        for where in [scope, tree] if scope is not tree else [tree]:
            if where is not tree and name in _parameters(where):
                return False  # whatever the caller passes: not provably the project's SQL
            values = [v for target, v in _assignments(where) if target == name]
            if values:
                return all(check(v, module, where, depth + 1) for v in values)
            imported = _import_source(tree, name, module)
            if imported and where is tree:
                other, attr = imported
                if other in self.trees:
                    return self._bound_safely(attr, other, self.trees[other], depth + 1, check)
        return False

    def _imported(self, node: ast.Attribute, module: str, depth: int, check) -> bool:  # type: ignore[no-untyped-def]
        if not isinstance(node.value, ast.Name):
            return False
        source = _import_source(self.trees[module], node.value.id, module, whole_module=True)
        if source is None or source[0] not in self.trees:
            return False
        other = source[0]
        return self._bound_safely(node.attr, other, self.trees[other], depth + 1, check)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of this scope, not of the functions nested in it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _FUNCTIONS):
            stack.extend(ast.iter_child_nodes(node))


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _parameters(function: ast.AST) -> set[str]:
    args = getattr(function, "args", None)
    if args is None:
        return set()
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _assignments(scope: ast.AST) -> list[tuple[str, ast.AST]]:
    found: list[tuple[str, ast.AST]] = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.append((target.id, node.value))
                elif isinstance(target, ast.Tuple | ast.List):  # unpacking: not followed
                    found.extend((n, ast.Name(id="<unpacked>")) for n in _names(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            value = node.value if isinstance(node, ast.AnnAssign) else node
            if value is not None:
                found.append((node.target.id, value))
        elif isinstance(node, ast.NamedExpr):
            found.append((node.target.id, node.value))
    return found


def _import_source(
    tree: ast.Module, name: str, module: str, whole_module: bool = False
) -> tuple[str, str] | None:
    """(sibling module file, attribute) that `name` was imported from, if in the scanned code."""
    package = module.rsplit("/", 1)[0]
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rsplit("/", 1)[0]
            parts = [p for p in (node.module or "").split(".") if p]
            if node.level == 0:
                if not parts or parts[0] not in {"claimsched", "claimsched_operator"}:
                    return None
                base, parts = parts[0], parts[1:]
            path = "/".join([base, *parts])
            if whole_module:
                return f"{path}/{alias.name}.py", ""
            for candidate in (f"{path}.py", f"{path}/__init__.py"):
                return candidate, alias.name
    return None


def _scan(files: dict[str, str]) -> SqlSafety:
    safety = SqlSafety(files)
    safety.findings()
    return safety


def _sources() -> dict[str, str]:
    files = {}
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            files[f"{root.name}/{path.relative_to(root).as_posix()}"] = path.read_text()
    return files


def test_every_sql_statement_in_agent_and_operator_is_parameterized() -> None:
    safety = SqlSafety(_sources())
    findings = safety.findings()
    assert findings == [], "SQL built from runtime values:\n" + "\n".join(findings)
    assert safety.calls >= 40, f"only {safety.calls} execute calls found: the scan is broken"


def _verdict(code: str, extra: dict[str, str] | None = None) -> list[str]:
    files = {"claimsched/db/thing.py": code, **(extra or {})}
    return SqlSafety(files).findings()


@pytest.mark.parametrize(
    "code",
    [
        "def f(conn, job):\n    conn.execute(f\"SELECT * FROM job_runs WHERE job_name = '{job}'\")",
        "def f(conn, job):\n    conn.execute(\"SELECT * FROM t WHERE j = '%s'\" % job)",
        'def f(conn, job):\n    conn.execute("SELECT * FROM t WHERE j = \'" + job + "\'")',
        "def f(conn, job):\n    conn.execute(\"SELECT * FROM t WHERE j = '{}'\".format(job))",
        'def f(conn, job):\n    q = f"DELETE FROM {job}"\n    conn.execute(q)',
        "def f(conn, statement):\n    conn.execute(statement)",
        "from psycopg import sql\ndef f(conn, t):\n    conn.execute(sql.SQL(f'DROP TABLE {t}'))",
        "from psycopg import sql\ndef f(conn, t):\n    conn.execute(sql.SQL('DROP TABLE ' + t))",
        "def f(cur, t):\n    cur.executemany(f'INSERT INTO {t} VALUES (%s)', [[1]])",
        "def f(conn, t):\n    with conn.cursor() as cur:\n        cur.execute('SELECT ' + t)",
        "def f(conn, rows):\n    for text in rows:\n        conn.execute(text)",
        "def f(conn, job):\n    q = 'SELECT 1'\n    q = q + job\n    conn.execute(q)",
    ],
    ids=[
        "f-string",
        "percent",
        "concatenation",
        "str.format",
        "variable f-string",
        "parameter",
        "sql.SQL of f-string",
        "sql.SQL of concatenation",
        "executemany",
        "cursor",
        "loop over data",
        "reassigned",
    ],
)
def test_the_scan_flags_sql_built_from_runtime_values(code: str) -> None:
    assert _verdict(code), f"not flagged:\n{code}"


@pytest.mark.parametrize(
    "code",
    [
        "def f(conn, j):\n    conn.execute('SELECT * FROM t WHERE j = %s', [j])",
        "from .queries import query\ndef f(conn, j):\n    conn.execute(query('claim'), {'j': j})",
        "from psycopg import sql\ndef f(conn, s):\n"
        "    conn.execute(sql.SQL('CREATE SCHEMA {}').format(sql.Identifier(s)))",
        "from psycopg import sql\nQ = sql.SQL('DROP TABLE {}')\n"
        "def f(conn, n):\n    conn.execute(Q.format(sql.Identifier(n)))",
        "STATEMENT = (\n    'SELECT 1 '\n    'FROM t'\n)\n"
        "def f(conn):\n    conn.execute(STATEMENT)",
        "from .queries import migration_files\ndef f(conn):\n"
        "    for v, name, text in migration_files():\n        conn.execute(text)",
        "from . import other as o\ndef f(conn):\n    conn.execute(o.LEDGER)",
    ],
    ids=[
        "parameters",
        "named query",
        "sql composition",
        "module composable",
        "module constant",
        "packaged migrations",
        "sibling module constant",
    ],
)
def test_the_scan_accepts_the_projects_own_sql(code: str) -> None:
    extra = {"claimsched/db/other.py": "LEDGER = 'SELECT 1'\n"}
    assert _verdict(code, extra) == []


def test_named_queries_take_parameters_only_as_placeholders() -> None:
    """The .sql files hold statements with %(name)s parameters; nothing else is substituted."""
    folder = REPO / "agent" / "claimsched" / "sql"
    files = [folder / "queries.sql", folder / "operator.sql"]
    for path in files:
        text = re.sub(r"--[^\n]*|'[^']*'", "", path.read_text())  # comments, string literals
        assert not re.search(r"\{[a-z_0-9]*\}", text), f"{path.name}: str.format fields"
        for token in re.findall(r"%%|%\([a-z_]+\)s|%.", text):
            assert token == "%%" or token.startswith("%("), f"{path.name}: {token!r}"


def test_ruff_rejects_sql_built_from_strings_too() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "S608" in config["tool"]["ruff"]["lint"]["select"]
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run(
        [str(ruff), "check", "--select", "S608", "--no-cache", "agent", "operator"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


INJECTED = "'; DELETE FROM job_runs; -- "  # data, never run


def test_injection_strings_travel_as_data(store: Store, dsn: str) -> None:
    from claimsched.specs import job_spec

    store.upsert_schedule(job_spec(job_name="j", schedule="@daily"))
    assert len(store.request_runs("j", [store.db_now()], "manual")) == 1
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


def _grant_app_rights(admin_dsn: str, user: str) -> None:
    """What an app role needs: read and write the rows, nothing else (no DDL, no DELETE)."""
    role = pgsql.Identifier(user)
    database = psycopg.conninfo.conninfo_to_dict(admin_dsn)["dbname"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                pgsql.Identifier(str(database)), role
            )
        )
        conn.execute(pgsql.SQL("GRANT USAGE ON SCHEMA claimsched TO {}").format(role))
        conn.execute(
            pgsql.SQL(
                "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA claimsched TO {}"
            ).format(role)
        )
        conn.execute(pgsql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))


def test_the_agent_runs_with_a_role_that_has_no_ddl_rights(
    dsn: str, password_role: PasswordRole, capsys: pytest.CaptureFixture[str]
) -> None:
    from claimsched.cli import main
    from claimsched.specs import job_spec

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
    Store(dsn).upsert_schedule(
        job_spec(
            job_name="tick",
            schedule="@every 1s",
            lease_seconds=3,
            heartbeat_seconds=1,
            source="cli",
        )
    )
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
        Store(uri).migrate()
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
        from tests.chaos import app_sql

        conn.execute(app_sql.LEDGER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
    env.update(
        {
            "CLAIMSCHED_DSN": uri,
            "CLAIMSCHED_LOG_LEVEL": "DEBUG",
            "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.3",
            "PYTHONPATH": CHILD_PYTHONPATH,
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
    process = spawn_agent("tests.chaos.app:agent", env, log, cwd=REPO)
    try:
        wait_for(lambda: "run done" in log.read_text(), timeout=30, what="a run")
        pg.restart("fast")
        wait_for(lambda: log.read_text().count("run done") >= 3, timeout=30, what="more runs")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
    text = log.read_text()
    assert "database unavailable" in text and "agent stopped" in text
    assert _leaks(text) == [], text[-2000:]
