"""`pip install claimsched` as users do it: the wheel built from this checkout (via its sdist),
installed into fresh virtualenvs outside the repository, then used only through them."""

from __future__ import annotations

import subprocess
import tarfile
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process
from tests.helpers.kube_emulator import serve_emulator
from tests.helpers.polling import http_ok, wait_for
from tests.install.installed import Dist, Venv, build, copy_checkout, source_files

pytestmark = pytest.mark.slow

#: What an app image gets with `pip install claimsched`: none of these may come along.
NOT_IN_AN_AGENT = {"pydantic", "pydantic-settings", "pydantic-core", "kopf", "aiohttp", "rich",
                   "prometheus-client", "kubernetes", "pygments"}

APP = textwrap.dedent("""
    from claimsched import Agent, Run

    agent = Agent()

    @agent.job("wheel-probe", schedule="@every 1s", catch_up_policy="None")
    def probe(run: Run) -> None:
        run.effect("probe")
""")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    source = copy_checkout(tmp_path_factory.mktemp("checkout"))
    return build(source, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def agent_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """`pip install claimsched` (the wheel, no extras): what goes into every app image."""
    env = Venv.create(tmp_path_factory.mktemp("venv") / "agent")
    env.pip_install(str(dist.wheel))
    return env


@pytest.fixture(scope="module")
def operator_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """`pip install claimsched[operator]`: what goes into the operator image."""
    env = Venv.create(tmp_path_factory.mktemp("venv") / "operator")
    env.pip_install(f"{dist.wheel}[operator]")
    return env


def test_the_wheel_holds_every_module_and_sql_file_of_the_packages(dist: Dist) -> None:
    shipped = set(zipfile.ZipFile(dist.wheel).namelist())
    wanted = {name.split("/", 1)[1] for name in source_files()
              if name.startswith(("agent/", "operator/"))
              and name.endswith((".py", ".sql", "py.typed")) and name.count("/") >= 2}
    assert wanted, "no package files found in the checkout"
    assert not wanted - shipped, f"missing from the wheel: {sorted(wanted - shipped)}"


def test_the_sdist_holds_the_sources_and_the_build_recipe(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("pyproject.toml", "README.md", "agent/claimsched/db/store.py",
                   "agent/claimsched/db/sql/functions/index.sql",
                   "agent/claimsched/db/sql/migrations/0001_initial.sql",
                   "operator/claimsched_operator/main.py"):
        assert needed in names, f"{needed} is missing from the sdist"


def test_an_agent_install_pulls_only_what_an_agent_needs(agent_venv: Venv) -> None:
    installed = agent_venv.distributions()
    assert "claimsched" in installed
    assert not installed & NOT_IN_AN_AGENT, f"pulled in: {sorted(installed & NOT_IN_AN_AGENT)}"


def test_the_installed_package_is_imported_from_the_venv(agent_venv: Venv) -> None:
    result = agent_venv.run("python", "-c", "import claimsched, claimsched.db; "
                            "print(claimsched.__file__); print(claimsched.__version__)")
    assert result.returncode == 0, result.stderr
    location = Path(result.stdout.split()[0])
    assert agent_venv.root in location.parents, f"imported from {location}"


def test_the_cli_helps_and_migrates(agent_venv: Venv, empty_dsn: str) -> None:
    helped = agent_venv.run("claimsched", "--help")
    assert helped.returncode == 0 and "migrate" in helped.stdout
    migrated = agent_venv.run("claimsched", "migrate", "--dsn", empty_dsn)
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(empty_dsn) as conn:
        version = conn.execute("SELECT max(version) FROM claimsched.schema_version").fetchone()
    assert version is not None and version[0] >= 1


def test_a_real_agent_from_the_wheel_claims_and_completes_an_occurrence(
    agent_venv: Venv, dsn: str, tmp_path: Path
) -> None:
    (tmp_path / "probeapp.py").write_text(APP)
    log = tmp_path / "agent.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(agent_venv.bin("claimsched")), "agent", "probeapp:agent"],
            # the app's module from the working directory, as uvicorn and gunicorn find it
            cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT,
            env=agent_venv.env(CLAIMSCHED_DSN=dsn),
        )
    try:
        def done() -> bool:
            assert process.poll() is None, f"the agent exited:\n{log.read_text()[-3000:]}"
            with psycopg.connect(dsn) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM claimsched.job_runs r JOIN claimsched.job_effects e"
                    " USING (job_name, fire_time)"
                    " WHERE r.job_name = 'wheel-probe' AND r.status = 'done'").fetchone()
            return bool(row and row[0] >= 1)

        wait_for(done, timeout=30, what="a done run of wheel-probe with its receipt")
    finally:
        code = stop_process(process, 30)
    assert code == 0, log.read_text()[-3000:]


def test_asking_for_metrics_without_the_extra_is_a_clear_error(
    agent_venv: Venv, dsn: str, tmp_path: Path
) -> None:
    (tmp_path / "probeapp.py").write_text(APP)
    result = agent_venv.run("claimsched", "agent", "probeapp:agent", cwd=tmp_path,
                            CLAIMSCHED_DSN=dsn, CLAIMSCHED_METRICS_PORT="0")
    assert result.returncode == 1
    assert "claimsched[metrics]" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_demo_without_its_extra_is_a_clear_error(agent_venv: Venv) -> None:
    result = agent_venv.run("claimsched", "demo", "--duration", "30")
    assert result.returncode == 1
    assert "claimsched[demo]" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    with serve_emulator(tmp_path) as served:
        yield served.kubeconfig


def test_the_operator_from_the_wheel_loads_its_settings_and_serves_health(
    operator_venv: Venv, dsn: str, kubeconfig: Path, tmp_path: Path
) -> None:
    imported = operator_venv.run("python", "-c", "import claimsched_operator.main, kopf")
    assert imported.returncode == 0, imported.stderr
    helped = operator_venv.run("claimsched-operator", "--help")
    assert helped.returncode == 0 and "CLAIMSCHED_DSN" in helped.stdout
    port = free_port()
    log = tmp_path / "operator.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(operator_venv.bin("claimsched-operator"))], cwd=tmp_path, stdout=sink,
            stderr=subprocess.STDOUT,
            env=operator_venv.env(KUBECONFIG=str(kubeconfig), CLAIMSCHED_DSN=dsn,
                                  CLAIMSCHED_OPERATOR_HEALTH_PORT=str(port),
                                  CLAIMSCHED_OPERATOR_METRICS_PORT="0"),
        )
    try:
        def healthy() -> bool:
            assert process.poll() is None, f"the operator exited:\n{log.read_text()[-3000:]}"
            return http_ok(f"http://127.0.0.1:{port}/healthz")

        wait_for(healthy, timeout=30, what="the installed operator's /healthz")
    finally:
        stop_process(process, 30)
