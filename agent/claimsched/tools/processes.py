"""Real processes: `claimsched agent MODULE:ATTR` with its output in a log file, and the one way
to stop a process (SIGTERM, a grace, then SIGKILL).

The demo, the benchmarks and the process tests all run their replicas through this one launcher,
and the benchmarks and tests stop every process they start through `stop_process`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def python_path(*folders: Path) -> str:
    """A child's PYTHONPATH: these folders first, then this process's own PYTHONPATH (so the
    child runs the same code as its parent, a checkout's rather than an installed copy)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join([*map(str, folders), *filter(None, inherited)])


def spawn_agent(
    target: str, env: dict[str, str], log: Path, *, python: str | Path = sys.executable,
    **popen: Any
) -> subprocess.Popen[bytes]:
    """Start `claimsched agent TARGET` with this environment; stdout and stderr go to `log`.
    `python` is the interpreter whose claimsched runs it: this one's, or another release's."""
    with open(log, "wb") as sink:
        return subprocess.Popen(
            [str(python), "-m", "claimsched.cli", "agent", target],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            **popen,
        )


def stop_process(process: subprocess.Popen[Any], grace: float) -> int:
    """SIGTERM, up to `grace` seconds to exit, then SIGKILL; returns the exit code (-SIGKILL:
    it had to be killed)."""
    (code,) = stop_processes([process], grace)
    return code


def stop_processes(processes: Sequence[subprocess.Popen[Any]], grace: float) -> list[int]:
    """`stop_process` for several at once: all get SIGTERM, then share the one grace."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait(10))
    return codes
