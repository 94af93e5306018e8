"""Every SQL statement of the agent and the operator is parameterized: an AST proof over
agent/ and operator/, the named queries' placeholders, and ruff's S608 (no database needed; the
injection strings that travel as data, on a real one: tests/integration/test_security.py)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from claimsched.db.queries import SPEC_LISTS, call, function_files, queries

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "agent" / "claimsched", REPO / "operator" / "claimsched_operator"]

# -- every statement is parameterized: an AST proof over agent/ and operator/ --------------------

EXECUTORS = {"execute", "executemany", "copy", "stream"}
# statements read from the packaged, reviewed .sql files (roles_sql fills in quoted
# identifiers and literals only: sql.SQL(file).format(Identifier(...), Literal(...)); call
# makes a function's call from its signature: placeholders only, proven below)
SAFE_CALLS = {"query", "sql_text", "roles_sql", "call"}
# (version or file name, ..., SQL text) of the packaged migrations and function files
SAFE_ITERATORS = {"migration_files", "function_files"}
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
        if name == "compose":  # claimsched.db.compose: SQL(template).format(identifiers, literals)
            return bool(node.args) and self.constant_text(node.args[0], module, scope, depth)
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
        "from . import compose\ndef f(conn, t):\n    conn.execute(compose(f'DROP TABLE {t}'))",
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
        "compose of f-string",
    ],
)
def test_the_scan_flags_sql_built_from_runtime_values(code: str) -> None:
    assert _verdict(code), f"not flagged:\n{code}"


@pytest.mark.parametrize(
    "code",
    [
        "def f(conn, j):\n    conn.execute('SELECT * FROM t WHERE j = %s', [j])",
        "from .queries import query\ndef f(conn, j):\n    conn.execute(query('claim'), {'j': j})",
        "from .queries import call\ndef f(conn, j):\n"
        "    conn.execute(call('cs_claim_v2'), {'j': j})",
        "from psycopg import sql\ndef f(conn, s):\n"
        "    conn.execute(sql.SQL('CREATE SCHEMA {}').format(sql.Identifier(s)))",
        "from psycopg import sql\nQ = sql.SQL('DROP TABLE {}')\n"
        "def f(conn, n):\n    conn.execute(Q.format(sql.Identifier(n)))",
        "STATEMENT = (\n    'SELECT 1 '\n    'FROM t'\n)\n"
        "def f(conn):\n    conn.execute(STATEMENT)",
        "from .queries import migration_files\ndef f(conn):\n"
        "    for v, name, text in migration_files():\n        conn.execute(text)",
        "from . import other as o\ndef f(conn):\n    conn.execute(o.LEDGER)",
        "from . import compose\nQ = 'COMMENT ON SCHEMA {} IS {note}'\n"
        "def f(conn, s, n):\n    conn.execute(compose(Q, s, note=n))",
    ],
    ids=[
        "parameters",
        "named query",
        "function call",
        "sql composition",
        "module composable",
        "module constant",
        "packaged migrations",
        "sibling module constant",
        "compose of a constant",
    ],
)
def test_the_scan_accepts_the_projects_own_sql(code: str) -> None:
    extra = {"claimsched/db/other.py": "LEDGER = 'SELECT 1'\n"}
    assert _verdict(code, extra) == []


def test_named_queries_take_parameters_only_as_placeholders() -> None:
    """The .sql files hold statements with %(name)s parameters; nothing else is substituted but
    the spec column lists, which are composed of quoted identifiers (claimsched.db.queries)."""
    folder = REPO / "agent" / "claimsched" / "db" / "sql"
    files = [folder / "queries.sql", folder / "operator.sql", folder / "views.sql"]
    for path in files:
        text = re.sub(r"--[^\n]*|'[^']*'", "", path.read_text())  # comments, string literals
        fields = set(re.findall(r"\{[a-z_0-9]*\}", text))
        assert fields <= {f"{{{name}}}" for name in SPEC_LISTS}, (
            f"{path.name}: {fields}")
        for token in re.findall(r"%%|%\([a-z_]+\)s|%.", text):
            assert token == "%%" or token.startswith("%("), f"{path.name}: {token!r}"


CALLED = re.compile(r'SELECT \* FROM (?:"(?:[^"]|"")+"\.)?"\w+"\('
                    r'(?:%\([a-z_]+\)s::[a-z][a-z ]*(?:\[\])?(?:, (?=%))?)*\)')


def test_function_calls_take_parameters_only_as_placeholders() -> None:
    """claimsched.db.queries.call makes `SELECT * FROM f(%(a)s::type, ...)` from the signature
    of sql/functions/f.sql: the function a quoted identifier, each parameter a placeholder cast
    to a type name; a name that is no function file, or a parameter of another shape, is
    refused rather than written into a statement."""
    made = 0
    for file_name, _ in function_files():
        function = file_name.removesuffix(".sql")
        if not function.startswith("cs_"):
            continue
        for schema in (None, 'odd "schema"'):
            statement = call(function, schema)
            assert CALLED.fullmatch(statement), statement
            made += 1
    assert made >= 40, f"only {made} calls made: the scan is broken"
    for name in ("cs_claim_v2(); DROP TABLE job_runs; --", "../queries", "agent_alive"):
        with pytest.raises((ValueError, FileNotFoundError)):
            call(name)


def test_no_named_query_only_forwards_to_a_function() -> None:
    """Such a query would write the function's parameters a second time: call makes it."""
    forwarding = re.compile(r"SELECT (\*|[\w, ]+) FROM (\{schema\}\.)?\w+\((?:[^()]|%\(\w+\)s)*\)")
    for name, body in queries().items():
        text = "\n".join(line for line in body.splitlines() if not line.startswith("--"))
        assert not forwarding.fullmatch(" ".join(text.split())), name


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
