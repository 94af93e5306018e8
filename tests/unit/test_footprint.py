"""An agent replica stays small: pydantic, prometheus_client and the web view's HTTP server are
never imported by it, and the memory it frees goes back to the OS.

Each check runs in a fresh interpreter, because this test process has imported them already.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pydantic", "pydantic_core", "pydantic_settings", "prometheus_client", "rich", "yaml",
         "http.server", "claimsched.web.server")

APP = """
from claimsched import Agent, Run

agent = Agent()


@agent.job("tick", schedule="@every 1s", lease_seconds=3, heartbeat_seconds=1)
def tick(run: Run) -> None:
    pass
"""

# `claimsched agent app:agent`, as a replica starts, stopping where it would reach the database.
REPLICA = """
import json, sys
from claimsched import cli
from claimsched.agent import Agent

Agent.run_forever = lambda self: 0
code = cli.main(["agent", "app:agent"])
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.argv[1:] if m in sys.modules)}))
"""

METRICS = """
import sys
from claimsched import metrics

metrics.CLAIMS.labels(job="j", outcome="claimed").inc()
metrics.CLAIMS.labels("j", "claimed").inc()
metrics.ORPHANS_REAPED.inc(2)
metrics.FIRE_TO_START.labels("j").observe(0.5)  # before serve(): not kept
assert "prometheus_client" not in sys.modules
metrics.serve(0)
metrics.CLAIMS.labels("j", "claimed").inc()
metrics.RUNS.labels(job="j", status="done").inc()
metrics.FIRE_TO_START.labels("j").observe(0.25)
metrics.serve(0)  # a second agent in the process: the metrics are made once

from prometheus_client import generate_latest

print(generate_latest().decode())
"""


# 40 blocks of 1 MiB freed (but the last) after an 8 MiB one: what stays in the process, MiB.
BLOCKS = """
import sys
from claimsched import memory

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))

if "apart" in sys.argv:
    memory.keep_large_blocks_apart()
if "agent" in sys.argv:  # an agent keeps them apart from its construction on
    from claimsched import Agent
    Agent()
big = b"x" * (8 << 20)
del big  # glibc now takes blocks up to 8 MiB from its heap (unless kept apart)
before = rss()
blocks = [b"x" * (1 << 20) for _ in range(40)]
last = blocks[-1]
del blocks
if "trim" in sys.argv:
    memory.release_freed()
print(round(rss() - before))
"""


def _python(code: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAIMSCHED_", "MALLOC_"))} | (env or {})
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(cwd), *os.environ.get("PYTHONPATH", "").split(
                os.pathsep)]).rstrip(os.pathsep),
            "CLAIMSCHED_DSN": "postgresql://app:hunter2@nowhere.invalid/x",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_agent_replica_imports_neither_pydantic_nor_prometheus_client_nor_a_web_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(APP)
    outcome = json.loads(_python(REPLICA, *HEAVY, cwd=tmp_path))
    assert outcome == {"code": 0, "loaded": []}


def test_metrics_count_before_serving_and_are_real_prometheus_metrics_once_served(
    tmp_path: Path,
) -> None:
    text = _python(METRICS, cwd=tmp_path)
    assert 'claimsched_claims_total{job="j",outcome="claimed"} 3.0' in text
    assert "claimsched_orphans_reaped_total 2.0" in text
    assert 'claimsched_runs_total{job="j",status="done"} 1.0' in text
    assert 'claimsched_fire_to_start_seconds_count{job="j"} 1.0' in text
    assert 'claimsched_fire_to_start_seconds_sum{job="j"} 0.25' in text


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
@pytest.mark.parametrize(
    ("how", "env", "kept_mib"),
    [
        ("as glibc does", {}, 40),
        ("apart", {}, 1),
        ("agent", {}, 1),
        ("trim", {}, 1),
        ("apart", {"MALLOC_MMAP_THRESHOLD_": str(16 << 20)}, 40),  # the process's choice stands
    ],
)
def test_freed_large_blocks_go_back_to_the_os(
    tmp_path: Path, how: str, env: dict[str, str], kept_mib: int
) -> None:
    assert abs(int(_python(BLOCKS, how, cwd=tmp_path, env=env)) - kept_mib) <= 2
