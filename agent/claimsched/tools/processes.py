"""Real agent processes: `claimsched agent MODULE:ATTR`, its output in a log file.

The demo, the benchmarks and the process tests all run their replicas through this one launcher.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def python_path(*folders: Path) -> str:
    """A child's PYTHONPATH: these folders first, then this process's own PYTHONPATH (so the
    child runs the same code as its parent, a checkout's rather than an installed copy)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join([*map(str, folders), *filter(None, inherited)])


def spawn_agent(
    target: str, env: dict[str, str], log: Path, **popen: Any
) -> subprocess.Popen[bytes]:
    """Start `claimsched agent TARGET` with this environment; stdout and stderr go to `log`."""
    with open(log, "wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "claimsched.cli", "agent", target],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            **popen,
        )
