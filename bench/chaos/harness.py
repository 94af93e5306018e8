"""Real agent processes for fault tests and storms: start, signal, and read what they did."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from claimsched.db import Store
from claimsched.tools.processes import python_path, spawn_agent

from ..releases import Release, isolated_env
from . import app_sql

REPO = Path(__file__).resolve().parents[2]
APP = "bench.chaos.app:agent"

# A run in two halves, each an effect (`first-half`, two seconds, `second-half`), for a test to
# queue by hand and kill, pause or cut off in the middle.
SLOW: dict[str, Any] = {
    "name": "slow",
    "schedule": "@yearly",
    "before": "first-half",
    "after": "second-half",
    "sleep": 2,
    "lease_seconds": 3,
    "heartbeat_seconds": 1,
}


def faketime_library() -> str:
    """libfaketime's preload library, as shipped by the `libfaketime` wheel (a dev dependency)."""
    import libfaketime

    found = sorted(
        Path(libfaketime.__file__).parent.glob("vendor/libfaketime/src/libfaketime.so.1")
    )
    if not found:
        raise RuntimeError("the libfaketime wheel has no libfaketime.so.1: reinstall .[dev]")
    return str(found[0])


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Replicas:
    """Agent processes running bench/chaos/app.py against one database."""

    dsn: str
    folder: Path
    jobs: list[dict[str, Any]]
    settings: dict[str, str] = field(default_factory=dict)
    running: dict[str, Replica] = field(default_factory=dict)

    def __post_init__(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(app_sql.LEDGER)

    def start(
        self,
        name: str,
        *,
        skew: str | None = None,
        skew_file: Path | None = None,
        log_name: str | None = None,
        release: Release | None = None,
        **settings: str,
    ) -> Replica:
        """Start an agent process named `name`.

        `skew` shifts its clock by a fixed libfaketime offset ("+90s"); `skew_file` reads the
        offset from a file (again every second), so replacing the file changes it while it runs.
        `log_name` keeps each incarnation's output apart when a name is restarted. `release`
        runs an earlier release's agent (bench/releases.py) instead of this checkout's: the
        same app, which only uses what both releases have.
        """
        env = isolated_env()
        env.update(
            {
                "CLAIMSCHED_DSN": self.dsn,
                "CLAIMSCHED_AGENT_ID": name,
                "CLAIMSCHED_HOUSEKEEPING_SECONDS": "0.5",
                "CLAIMSCHED_SHUTDOWN_GRACE_SECONDS": "5",
                "CLAIMSCHED_LOG_LEVEL": "DEBUG",
                "APP_JOBS": json.dumps(self.jobs),
                # the app; for an earlier release nothing else (this checkout's claimsched not)
                "PYTHONPATH": str(REPO) if release else python_path(REPO),
                **self.settings,
                **settings,
            }
        )
        if skew or skew_file:
            env.update({"LD_PRELOAD": faketime_library(), "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
            if skew_file is not None:
                # re-read the offset once a second: with FAKETIME_NO_CACHE every clock read
                # re-reads the file, and libfaketime's parser is not thread-safe (it aborts the
                # process with "failed to parse FAKETIME timestamp" under concurrent reads)
                env.update(
                    {"FAKETIME_TIMESTAMP_FILE": str(skew_file), "FAKETIME_CACHE_DURATION": "1"}
                )
            else:
                env["FAKETIME"] = str(skew)
        log = self.folder / f"{log_name or name}.log"
        python = release.python if release else sys.executable
        process = spawn_agent(APP, env, log, python=python, cwd=REPO)
        replica = Replica(name, process, log)
        self.running[log_name or name] = replica
        return replica

    def stop_all(self) -> None:
        for replica in self.running.values():
            if replica.alive:
                replica.signal(signal.SIGCONT)
                replica.signal(signal.SIGKILL)
            replica.process.wait(10)

    def owner_of_running(self, job: str) -> str | None:
        rows = self.query(
            "SELECT claimed_by FROM claimsched.job_runs WHERE job_name = %s AND status = 'running'",
            [job],
        )
        return rows[0][0] if rows else None

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def dump(self) -> str:
        return "\n".join(
            f"--- {name} (exit {r.process.poll()}) ---\n{r.output()[-3000:]}"
            for name, r in self.running.items()
        )


@contextmanager
def replicas(
    dsn: str, folder: Path, jobs: list[dict[str, Any]], **settings: str
) -> Iterator[Replicas]:
    group = Replicas(dsn, folder, jobs, settings)
    try:
        yield group
    except BaseException:
        print(group.dump())
        raise
    finally:
        group.stop_all()


def store(dsn: str) -> Store:
    s = Store(dsn)
    s.open()
    return s
