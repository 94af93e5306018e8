"""Real agent processes: `claimsched agent MODULE:ATTR`, its output in a log file.

The demo, the benchmarks and the process tests all run their replicas through this one launcher.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any


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
