"""Scenario f: recovery. How soon and how completely work comes back after a replica dies or is
fenced out, with real agent processes (bench/chaos/app.py) and real signals.

- kill to restart: a manual run of a long job on R replicas; its owner is SIGKILLed (and
  restarted); measured from the kill (database clock) to the next attempt's start, `kills`
  times per (lease, heartbeat). The housekeeping period is the agent's default: what decides is
  the lease and the heartbeat, not the period.
- pause of the reclaimer: the owner of a run (effects `before`, 4 s of work, `after`) is
  SIGKILLed; the replica that reclaims it is SIGSTOPped for its lease + 6 s, then continued.
  Counted: how each trial ended (done, and each effect exactly once, is the only good ending)
  and what its superseded attempts say (orphaned, fenced_out).
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from claimsched.db import Store
from claimsched.settings import AgentSettings
from claimsched.tools.postgres import TemporaryPostgres
from claimsched.version import __version__

from . import drain
from .chaos.harness import Replicas
from .common import RESULTS, finish
from .measure import summary_ms, target

HOUSEKEEPING = str(AgentSettings.fields["housekeeping_seconds"].default)
LONG = "long"
HALVES = "halves"


def run(
    part: str = "all",
    replicas: int | None = None,
    kills: int = 50,
    trials: int = 10,
    backlog: int = 1000,
    handler_ms: float = 10.0,
    max_concurrency: int = 16,
    out: Path | None = None,
    name: str | None = None,
) -> list[Path]:
    """Every part of scenario f (or the one named), each writing its own result."""
    paths = []
    if part in ("all", "restart"):
        paths.append(restarts(replicas or 3, kills, trials, out,
                              name if part == "restart" else None))
    if part in ("all", "fleet"):
        paths.append(dead_fleet(replicas or 3, trials, out, name if part == "fleet" else None))
    if part in ("all", "drain"):
        paths.append(drain.run(replicas or 4, backlog, handler_ms, max_concurrency, out,
                               name if part == "drain" else None))
    return paths


def restarts(
    replicas: int = 3,
    kills: int = 50,
    trials: int = 10,
    out: Path | None = None,
    name: str | None = None,
) -> Path:
    """Kill to restart latency, and the reclaimer paused past its lease."""
    name = name or f"f-r{replicas}"
    configs = [(5, 1), (10, 2)]  # (lease, heartbeat) seconds
    result: dict[str, Any] = {
        "scenario": "f",
        "name": name,
        "params": {"replicas": replicas, "kills": kills, "pause_trials": trials,
                   "housekeeping_seconds": float(HOUSEKEEPING),
                   "lease_heartbeat": configs},
    }
    latencies: dict[str, list[float]] = {}
    with _database() as (pg, env):
        result["environment"] = env
        for lease, heartbeat in configs:
            key = f"lease {lease} s, heartbeat {heartbeat} s"
            latencies[key] = _kill_to_restart(pg.dsn, replicas, kills, lease, heartbeat)
        result["pause_of_reclaimer"] = _pauses(pg.dsn, replicas, trials)
    result["kill_to_restart"] = {
        key: {**summary_ms(values), "bound_ms": 1000 * (lease + heartbeat)}
        for (key, values), (lease, heartbeat) in zip(latencies.items(), configs, strict=True)
    }
    pauses = result["pause_of_reclaimer"]
    result["targets"] = [
        *(target(f"kill to restart p99, {key}, s", round(v["p99_ms"] / 1000, 3),
                 v["bound_ms"] / 1000) for key, v in result["kill_to_restart"].items()),
        target("pause of the reclaimer: trials not done with every effect once",
               trials - pauses["outcomes"].get("done, effects once", 0), 0),
    ]
    out = out or RESULTS
    path = finish(result, out, name)
    _plot(result, latencies, out / f"{name}.png")
    return path


def dead_fleet(
    replicas: int = 3,
    trials: int = 10,
    out: Path | None = None,
    name: str | None = None,
) -> Path:
    """How long after a whole fleet stopped (SIGTERM: it signs off; SIGKILL: its presence
    expires), counted from its last replica's exit to the asking of the first `claimsched
    status` that says the job is unhealthy (exit 2), polled twice a second (each a CLI process of
    its own)."""
    name = name or f"f-fleet-r{replicas}"
    found: dict[str, list[float]] = {"SIGTERM": [], "SIGKILL": []}
    result: dict[str, Any] = {"scenario": "f", "name": name,
                              "params": {"replicas": replicas, "trials": trials,
                                         "schedule": "@every 2s",
                                         "housekeeping_seconds": float(HOUSEKEEPING)}}
    with _database() as (pg, env), tempfile.TemporaryDirectory(prefix="bench-f-") as folder:
        result["environment"] = env
        for trial in range(trials):
            for how in found:
                # A job of its own each time: the fleets killed before still look alive until
                # their presence expires, and would handle a shared job meanwhile.
                job = f"tick-{how.lower()}-{trial}"
                group = _group(pg.dsn, Path(folder), [
                    {"name": job, "schedule": "@every 2s", "after": "tick"}])
                try:
                    found[how].append(_one_fleet(group, job, replicas, trial, how))
                finally:
                    group.stop_all()
    result["detected_after_s"] = {how: summary_ms(v) for how, v in found.items()}
    result["targets"] = [
        target(f"dead fleet ({how}) seen by status, max s", round(max(v), 2), bound)
        for (how, v), bound in zip(found.items(), (2.0, 20.0), strict=True)]
    out = out or RESULTS
    path = finish(result, out, name)
    _plot_fleet(found, out / f"{name}.png")
    return path


def _one_fleet(group: Replicas, job: str, replicas: int, trial: int, how: str) -> float:
    """Start the fleet, let it run the job, stop every replica at once; seconds until
    `claimsched status` exits 2."""
    names = [f"{how.lower()}{trial}-{i}" for i in range(replicas)]
    _start(group, names)
    _wait(lambda: _status(group, job) == 0, 60, "a healthy job", 0.5)
    for replica in names:
        group.running[replica].signal(getattr(signal, how))
    for replica in names:
        group.running[replica].process.wait(30)
    ((gone_at,),) = group.query("SELECT clock_timestamp()")  # the last replica has exited
    # When the `status` that first said so was asked (a CLI process takes seconds to start on
    # a loaded machine: its own time is not the detection's).
    seen_at = _wait(lambda: _asked_and_unhealthy(group, job), 300,
                    "status to see the dead fleet", 0.5)
    return float((seen_at - gone_at).total_seconds())


def _asked_and_unhealthy(group: Replicas, job: str) -> Any:
    """The database's clock when `claimsched status` was asked, if it answered unhealthy."""
    ((asked_at,),) = group.query("SELECT clock_timestamp()")
    return asked_at if _status(group, job) == 2 else None


def _status(group: Replicas, job: str) -> int:
    """`claimsched status JOB` as a user runs it: its exit code."""
    command = Path(sys.executable).with_name("claimsched")
    done = subprocess.run([str(command), "status", job, "--dsn", group.dsn],
                          capture_output=True, text=True, check=False)
    return done.returncode


def _plot_fleet(found: dict[str, list[float]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.boxplot(list(found.values()), tick_labels=list(found))
    ax.set_ylabel("seconds from the fleet's stop to `status` exit 2")
    ax.set_title("f: a dead fleet is never healthy")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@contextmanager
def _database() -> Iterator[tuple[TemporaryPostgres, dict[str, Any]]]:
    with TemporaryPostgres() as pg:
        store = Store(pg.dsn, max_size=1, name="bench-f-migrate")
        try:
            store.admin.migrate()
        finally:
            store.close()
        env = {"claimsched": __version__, "python": platform.python_version(),
               "cpus": os.cpu_count(),
               "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}
        yield pg, env


def _group(dsn: str, folder: Path, jobs: list[dict[str, Any]]) -> Replicas:
    return Replicas(dsn, folder, jobs, {"CLAIMSCHED_HOUSEKEEPING_SECONDS": HOUSEKEEPING,
                                        "CLAIMSCHED_LOG_LEVEL": "INFO"})


def _wait(condition: Callable[[], Any], timeout: float, what: str,
          interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(interval)
    raise TimeoutError(f"bench f: {what} did not happen within {timeout:g} s")


def _start(group: Replicas, names: list[str]) -> None:
    """Start these replicas and wait until each has said it is there, and its jobs' schedules
    are declared."""
    ((since,),) = group.query("SELECT now()")
    for replica in names:
        group.start(replica)
    jobs = [job["name"] for job in group.jobs]
    _wait(lambda: len(group.query("SELECT 1 FROM claimsched.agents WHERE agent_id = ANY(%s)"
                                  " AND last_seen >= %s", [names, since])) == len(names)
          and len(group.query("SELECT 1 FROM claimsched.job_schedule WHERE job_name = ANY(%s)",
                              [jobs])) == len(jobs), 60, "the agents")


def _trigger(group: Replicas, job: str) -> int:
    """Queue one manual run of `job` now; its id."""
    store = Store(group.dsn, max_size=1, name="bench-f")
    store.open()
    try:
        (fire_time,) = store.listings.request_runs(job, [store.db_now()], "manual")
    finally:
        store.close()
    ((run_id,),) = group.query("SELECT id FROM claimsched.job_runs"
                               " WHERE job_name = %s AND fire_time = %s", [job, fire_time])
    return int(run_id)


def _running(group: Replicas, run_id: int, attempt: int) -> tuple[str, Any] | None:
    rows = group.query("SELECT claimed_by, started_at FROM claimsched.job_runs"
                       " WHERE id = %s AND attempt = %s AND status = 'running'", [run_id, attempt])
    return (rows[0][0], rows[0][1]) if rows else None


def _kill(group: Replicas, name: str, incarnation: int) -> Any:
    """SIGKILL `name` (at the returned database instant) and start it again."""
    ((killed_at,),) = group.query("SELECT clock_timestamp()")
    group.running[name].signal(signal.SIGKILL)
    group.running[name].process.wait(10)
    group.running.pop(name)
    log = f"{name}-{incarnation}"
    group.start(name, log_name=log)
    group.running[name] = group.running.pop(log)  # found by its agent id, logged apart
    return killed_at


def _kill_to_restart(dsn: str, replicas: int, kills: int, lease: int,
                     heartbeat: int) -> list[float]:
    job = {"name": f"{LONG}{lease}", "schedule": "@yearly", "sleep": 3 * lease,
           "lease_seconds": lease, "heartbeat_seconds": heartbeat,
           "concurrency_policy": "Allow", "max_attempts": 2}
    seconds: list[float] = []
    with tempfile.TemporaryDirectory(prefix="claimsched-bench-f-") as folder:
        group = _group(dsn, Path(folder), [job])
        try:
            _start(group, [f"r{i}" for i in range(replicas)])
            seconds = [_one_kill(group, job["name"], kill, lease) for kill in range(kills)]
        finally:
            group.stop_all()
    return seconds


def _one_kill(group: Replicas, job: str, kill: int, lease: int) -> float:
    """Seconds from the SIGKILL of a run's owner to its next attempt's start."""
    run_id = _trigger(group, job)
    owner, _ = _wait(lambda: _running(group, run_id, 1), 30, "the run to start")
    killed_at = _kill(group, owner, kill)
    _, restarted = _wait(lambda: _running(group, run_id, 2), 6 * lease + 60, "the next attempt")
    return float((restarted - killed_at).total_seconds())


def _pauses(dsn: str, replicas: int, trials: int) -> dict[str, Any]:
    lease = 5
    job = {"name": HALVES, "schedule": "@yearly", "before": "before", "after": "after",
           "sleep": 4, "lease_seconds": lease, "heartbeat_seconds": 1}
    outcomes: Counter[str] = Counter()
    superseded: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="claimsched-bench-f-") as folder:
        group = _group(dsn, Path(folder), [job])
        try:
            _start(group, [f"p{i}" for i in range(replicas)])
            for trial in range(trials):
                run_id = _one_pause(group, trial, lease)
                status = _wait(lambda run_id=run_id: _settled(group, run_id), 120, "the end")
                outcomes[_ending(group, run_id, status)] += 1
                for (outcome,) in group.query(
                    "SELECT outcome FROM claimsched.job_attempts WHERE run_id = %s", [run_id]
                ):
                    superseded[outcome] += 1
        finally:
            group.stop_all()
    return {"outcomes": dict(outcomes), "superseded_attempts": dict(superseded)}


def _one_pause(group: Replicas, trial: int, lease: int) -> int:
    """Kill a run's owner after its first effect, pause its reclaimer past the lease, continue
    it; returns the run's id."""
    run_id = _trigger(group, HALVES)
    owner, _ = _wait(lambda: _running(group, run_id, 1), 30, "the run to start")
    _wait(lambda: group.query("SELECT 1 FROM public.ledger l JOIN claimsched.job_runs r"
                              " ON r.job_name = l.job AND r.fire_time = l.fire_time"
                              " WHERE l.entity = 'before' AND r.id = %s", [run_id]),
          30, "the first effect")
    _kill(group, owner, trial)
    reclaimer, _ = _wait(lambda: _running(group, run_id, 2), 120, "the reclaim")
    group.running[reclaimer].signal(signal.SIGSTOP)
    time.sleep(lease + 6)  # the pause itself: past the lease, whatever happens meanwhile
    group.running[reclaimer].signal(signal.SIGCONT)
    return run_id


def _settled(group: Replicas, run_id: int) -> str | None:
    rows = group.query("SELECT status FROM claimsched.job_runs WHERE id = %s"
                       " AND status IN ('done', 'failed')", [run_id])
    return str(rows[0][0]) if rows else None


def _ending(group: Replicas, run_id: int, status: str) -> str:
    effects = Counter(entity for (entity,) in group.query(
        "SELECT l.entity FROM public.ledger l JOIN claimsched.job_runs r"
        " ON r.job_name = l.job AND r.fire_time = l.fire_time WHERE r.id = %s", [run_id]))
    if status == "done" and effects == {"before": 1, "after": 1}:
        return "done, effects once"
    if any(n > 1 for n in effects.values()):
        return "duplicate effect"
    return f"{status}, effects {dict(sorted(effects.items()))}"


def _plot(result: dict[str, Any], latencies: dict[str, list[float]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label, seconds in latencies.items():
        xs = sorted(seconds)
        left.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                  label=f"{label} (n={len(xs)})")
    for (lease, heartbeat) in result["params"]["lease_heartbeat"]:
        left.axvline(lease + heartbeat, color="grey", lw=0.6, ls=":")
    left.axhline(0.99, color="grey", lw=0.6, ls=":")
    left.set_xlabel("kill to the next attempt's start, s (dotted: lease + heartbeat)")
    left.set_ylabel("fraction of kills")
    left.set_title("f: kill to restart")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    pauses = result["pause_of_reclaimer"]
    labels = [*pauses["outcomes"], *(f"superseded: {k}" for k in pauses["superseded_attempts"])]
    values = [*pauses["outcomes"].values(), *pauses["superseded_attempts"].values()]
    right.barh(range(len(labels)), values, color="tab:blue")
    right.set_yticks(range(len(labels)), labels, fontsize=8)
    right.invert_yaxis()
    right.set_title("f: reclaimer paused past its lease (trials)")
    right.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
