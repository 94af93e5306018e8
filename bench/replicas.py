"""Real agent processes (bench/app.py through the `claimsched agent` CLI), their CPU and RSS,
and the handler starts they recorded."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimsched.tools.processes import python_path, spawn_agent, stop_processes

from . import sql
from .cluster import Cluster, cpu_seconds, rss_mib

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Start:
    """One handler start, as the replica recorded it."""

    job: str
    fire_time: float
    agent: str
    attempt: int
    started: float


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    starts: Path
    log: Path
    cpu_marks: dict[str, float] = field(default_factory=dict)
    rss_samples: list[float] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def mark_cpu(self, label: str) -> None:
        self.cpu_marks[label] = cpu_seconds(self.pid) or 0.0

    def sample_rss(self) -> None:
        value = rss_mib(self.pid)
        if value is not None:
            self.rss_samples.append(value)

    def read_starts(self) -> list[Start]:
        found = []
        if not self.starts.exists():
            return found
        for line in self.starts.read_text().splitlines():
            job, fire, agent, attempt, started = line.split("\t")
            found.append(Start(job, float(fire), agent, int(attempt), float(started)))
        return found

    def problems(self) -> dict[str, int]:
        """WARNING/ERROR/CRITICAL lines of the replica's log, by message."""
        found: dict[str, int] = {}
        if not self.log.exists():
            return found
        for line in self.log.read_text(errors="replace").splitlines():
            match = re.search(r" (WARNING|ERROR|CRITICAL) (\S+): (.*?)(?: agent=| job=|$)", line)
            if match:
                key = re.sub(r"\d+", "N", f"{match.group(1)} {match.group(3)}")[:140]
                found[key] = found.get(key, 0) + 1
        return found

    def log_tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@dataclass
class Replicas:
    """R agent processes against the cluster's agent database."""

    cluster: Cluster
    folder: Path
    jobs: int
    prefix: str
    env: dict[str, str] = field(default_factory=dict)
    running: list[Replica] = field(default_factory=list)
    launched_at: float = 0.0

    def start(self, count: int) -> None:
        self.launched_at = time.time()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CLAIMSCHED_", "BENCH_"))}
        for index in range(count):
            name = f"r{index:02d}"
            starts = self.folder / f"{name}.starts"
            log = self.folder / f"{name}.log"
            env = {
                **base,
                "CLAIMSCHED_DSN": self.cluster.agent_dsn,
                "CLAIMSCHED_AGENT_ID": name,
                "CLAIMSCHED_MIGRATE": "false",
                "BENCH_STARTS": str(starts),
                "BENCH_JOB_PREFIX": self.prefix,
                "BENCH_JOB_COUNT": str(self.jobs),
                "PYTHONPATH": python_path(REPO),
                **self.env,
            }
            process = spawn_agent("bench.app:agent", env, log, cwd=REPO)
            self.running.append(Replica(name, process, starts, log))

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.running]

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Until every replica has announced itself (its first housekeeping); returns seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [r for r in self.running if r.process.poll() is not None]
            if dead:
                raise RuntimeError(f"replica {dead[0].name} exited:\n{dead[0].log_tail()}")
            live = self.cluster.execute(
                sql.LIVE_AGENTS, {"ids": self.names, "since": _ts(self.launched_at - 5)}
            )[0][0]
            if live == len(self.running):
                return time.time() - self.launched_at
            time.sleep(0.2)
        raise RuntimeError(f"replicas not ready after {timeout} s:\n{self.running[0].log_tail()}")

    def mark_cpu(self, label: str) -> None:
        for replica in self.running:
            replica.mark_cpu(label)

    def sample_rss(self) -> None:
        for replica in self.running:
            replica.sample_rss()

    def sleep_until(self, moment: float, sample_every: float = 1.0) -> None:
        """Sleep until the wall clock reaches `moment`, sampling RSS on the way."""
        while True:
            left = moment - time.time()
            if left <= 0:
                return
            self.sample_rss()
            time.sleep(min(left, sample_every))

    def stop(self, grace: float = 15.0) -> None:
        stop_processes([replica.process for replica in self.running], grace)

    def problems(self) -> dict[str, int]:
        """Log problems of all replicas, by message."""
        total: dict[str, int] = {}
        for replica in self.running:
            for key, count in replica.problems().items():
                total[key] = total.get(key, 0) + count
        return total

    def starts(self) -> list[Start]:
        return [s for r in self.running for s in r.read_starts()]

    def per_replica(self, since: str, until: str, minutes: float) -> list[dict[str, Any]]:
        """CPU seconds per minute between two marks, and RSS, of each replica."""
        rows = []
        for replica in self.running:
            cpu = replica.cpu_marks.get(until, 0.0) - replica.cpu_marks.get(since, 0.0)
            samples = replica.rss_samples or [0.0]
            rows.append(
                {
                    "replica": replica.name,
                    "cpu_s_per_min": round(cpu / minutes, 3),
                    "rss_mib_max": round(max(samples), 1),
                    "rss_mib_mean": round(sum(samples) / len(samples), 1),
                }
            )
        return rows


def _ts(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)
