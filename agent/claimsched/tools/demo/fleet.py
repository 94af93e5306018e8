"""The demo's replicas as processes: started, signalled and stopped, each in its own session.

Each replica is `claimsched agent claimsched.tools.demo.app:agent` with short leases and a fast
reaper, its output in a log file the demo reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..processes import spawn_agent
from . import app

AGENT_ENV = {
    "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",  # the reaper runs every half second
    "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": "5",
    "CLAIMSCHED_JITTER_SECONDS": "0.25",  # spreads the wins over the replicas
    # The demo learns who started which run from the replicas' "run started" lines
    # (action=start), which the agent logs at debug: at INFO every replica showed 0 runs started.
    "CLAIMSCHED_LOG_LEVEL": "DEBUG",
}


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: replicas get SIGKILL if the demo itself is killed (no strays, even then)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    kill = int(signal.SIGKILL)
    return lambda: prctl(1, kill)  # PR_SET_PDEATHSIG


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    state: str = "running"

    def signal(self, signum: int) -> None:
        """Signal the replica's process group (never a pid that was already reaped)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)


class Fleet:
    """Agent processes running the demo's app, each in its own session and process group."""

    def __init__(self, dsn: str, schema: str, folder: Path) -> None:
        self.dsn, self.schema, self.folder = dsn, schema, folder
        self.replicas: dict[str, Replica] = {}
        self._preexec = _die_with_parent()

    def start(self, name: str) -> Replica:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMSCHED_")}
        env.update(AGENT_ENV, CLAIMSCHED_DSN=self.dsn, CLAIMSCHED_SCHEMA=self.schema,
                   CLAIMSCHED_AGENT_ID=name)
        log = self.folder / f"{name}.log"
        process = spawn_agent(
            f"{app.__name__}:agent", env, log,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=self._preexec,
        )
        replica = self.replicas[name] = Replica(name, process, log)
        return replica

    def up(self, name: str | None) -> bool:
        replica = self.replicas.get(name or "")
        return replica is not None and replica.state == "running"

    def stop(self, grace: float) -> None:
        """SIGTERM (after SIGCONT) to every live replica, wait, then SIGKILL the stragglers."""
        alive = [r for r in self.replicas.values() if r.process.poll() is None]
        for replica in alive:
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for replica in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.process.wait(max(0.1, deadline - time.monotonic()))
        self.kill()
        for replica in alive:
            replica.state = "stopped"

    def kill(self) -> None:
        for replica in self.replicas.values():
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.process.wait(10)
