"""The Dockerfiles' build steps, replayed on this machine (tests/helpers/dockerfile.py): each
image installs the wheel built from this checkout, and its entrypoint works from what it built."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from claimsched.tools.processes import stop_process
from tests.helpers.dockerfile import Replay, replay
from tests.helpers.polling import wait_for
from tests.install.installed import REPO, clean_env, source_files

pytestmark = pytest.mark.slow


def build(dockerfile: str, root: Path) -> Replay:
    # The cache only saves downloads; the steps and what they install are the Dockerfile's own.
    env = clean_env(PIP_NO_CACHE_DIR="0")
    state = replay(REPO / dockerfile, REPO, source_files(), root, env)
    state.env.pop("PIP_NO_CACHE_DIR", None)
    return state


def test_the_operator_image_installs_the_wheel_and_runs_its_entrypoint(tmp_path: Path) -> None:
    image = build("operator/Dockerfile", tmp_path / "root")
    assert image.cmd == ["claimsched-operator"]
    wheels = list(image.host("/dist").glob("claimsched-*.whl"))
    assert len(wheels) == 1, "the image installs exactly the wheel built from the checkout"
    helped = subprocess.run([*image.cmd, "--help"], env=image.env, capture_output=True,
                            text=True, timeout=60, cwd=image.host("/tmp"))
    assert helped.returncode == 0, helped.stderr
    assert "CLAIMSCHED_DSN" in helped.stdout
    where = subprocess.run(["python", "-c", "import claimsched_operator; "
                            "print(claimsched_operator.__file__)"],
                           env=image.env, capture_output=True, text=True, timeout=60,
                           cwd=image.host("/tmp"))
    assert where.returncode == 0, where.stderr
    assert str(image.host("/opt")) in where.stdout, f"imported from {where.stdout}"


def test_the_example_app_image_runs_its_agent(tmp_path: Path, dsn: str) -> None:
    image = build("examples/app/Dockerfile", tmp_path / "root")
    assert image.cmd == ["claimsched", "agent", "app:agent"]
    log = tmp_path / "app.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(image.cmd, cwd=image.host("/app"), stdout=sink,
                                   stderr=subprocess.STDOUT,
                                   env={**image.env, "CLAIMSCHED_DSN": dsn})
    try:
        def present() -> bool:
            assert process.poll() is None, f"the app exited:\n{log.read_text()[-3000:]}"
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT handlers FROM claimsched.agents").fetchone()
            return bool(row and {"invoice-reminders", "expire-carts"} <= set(row[0]))

        wait_for(present, timeout=30, what="the example app's agent presence")
    finally:
        code = stop_process(process, 30)
    assert code == 0, log.read_text()[-3000:]
