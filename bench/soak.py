"""The soak profile: the chaos storm of bench/chaos, longer and wider, with a report and a plot.

    python -m bench.soak --replicas 10 --jobs 30 --duration 3600 --seed 7
    python -m bench.soak --ha --replicas 8 --jobs 24 --duration 600 --seed 3

R real agent processes run J jobs while seeded random faults overlap for `duration` seconds
(SIGKILL, SIGSTOP past the lease, SIGTERM, Postgres fast restarts, outages and outages longer
than every lease, a replica's clock skewed and re-skewed, restarts under a new agent id, manual
triggers and backfills of Forbid jobs that overrun their period, handlers frozen inside
`run.once()` past their lease, the owner of a reclaimed run paused past its lease, a backfill's
worker killed, the whole fleet down for longer than every period; maintenance runs
concurrently throughout). With --ha the database
is a Patroni cluster (two nodes, synchronous_mode_strict) and its faults are failovers (the
leader SIGKILLed, or switched over) instead of restarts and outages, and replicas are
partitioned from it (their connections black-holed for longer than every lease).
Then every fault is healed, the run settles, and every invariant of bench/chaos is checked.
Writes bench/results/soak[-ha]-r<R>-j<J>-s<seed>.json, the summary that is versioned (fault
counts, occurrences checked, the first violations, fire-to-start percentiles, faults, latencies
and the machine's load average by minute), .png (every fault and every latency over time, and the
load) and .samples.json, the raw samples (every fault, every fire-to-start latency, every load
reading), which git ignores. Exit status 1 when an invariant was
violated; the report says how to replay the seed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .chaos.cli import storm_arguments, storm_config
from .chaos.config import ChaosConfig
from .chaos.report import replay_command, summary
from .chaos.storm import run_seed

REPO = Path(__file__).resolve().parents[1]

RESULTS = REPO / "bench" / "results"
# raw samples: in <stem>.samples.json only
RAW = ("fire_to_start", "faults_executed", "faults_planned", "load")
VIOLATIONS_KEPT = 30  # the first ones, each cut at VIOLATION_CHARS (all of them: the samples)
VIOLATION_CHARS = 400
COLORS = {
    "sigkill": "tab:red",
    "sigstop": "tab:purple",
    "sigterm": "tab:orange",
    "new_id": "tab:brown",
    "pg_restart": "tab:blue",
    "pg_outage": "navy",
    "long_outage": "midnightblue",
    "skew": "tab:green",
    "trigger": "tab:olive",
    "backfill": "tab:cyan",
    "freeze_in_once": "tab:pink",
    "partition": "gold",
    "failover": "darkred",
    "pause_reclaimer": "violet",
    "kill_backfiller": "teal",
    "fleet_down": "dimgray",
    "exited": "black",
}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def by_minute(latencies: list[tuple[float, float]]) -> list[dict[str, Any]]:
    buckets: dict[int, list[float]] = defaultdict(list)
    for at, latency in latencies:
        buckets[int(at // 60)].append(latency)
    return [
        {
            "minute": minute,
            "occurrences": len(values),
            "p50_seconds": percentile(values, 0.5),
            "p99_seconds": percentile(values, 0.99),
            "max_seconds": max(values),
        }
        for minute, values in sorted(buckets.items())
    ]


def faults_by_minute(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """How many faults began in each minute of the storm, by kind."""
    buckets: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for event in events:
        buckets[int(event["at"] // 60)][event["kind"]] += 1
    return [
        {"minute": minute, "faults": sum(kinds.values()), "by_kind": dict(sorted(kinds.items()))}
        for minute, kinds in sorted(buckets.items())
    ]


class LoadSampler:
    """The machine's 1-minute load average every few seconds, while the soak runs (the machine
    is shared: a latency means little without it)."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append((time.time(), os.getloadavg()[0]))

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join(10)
        return self.samples


def load_by_minute(samples: list[tuple[float, float]]) -> list[dict[str, Any]]:
    buckets: dict[int, list[float]] = defaultdict(list)
    for at, load in samples:
        buckets[int(at // 60)].append(load)
    return [
        {"minute": minute, "mean": round(sum(v) / len(v), 2), "max": round(max(v), 2)}
        for minute, v in sorted(buckets.items())
    ]


def summarize(result: dict[str, Any], samples: str) -> dict[str, Any]:
    """What bench/results versions of a soak: totals, percentiles, per-minute aggregates and the
    first violations; the raw samples stay in `samples` (not versioned)."""
    kept = {key: value for key, value in result.items() if key not in RAW and key != "replay"}
    violations: list[str] = result["violations"]
    kept["violations"] = [
        v if len(v) <= VIOLATION_CHARS else v[: VIOLATION_CHARS - 1] + "…"
        for v in violations[:VIOLATIONS_KEPT]
    ]
    kept["violations_found"] = len(violations)
    kept["faults_by_minute"] = faults_by_minute(result["faults_executed"])
    kept["load_by_minute"] = load_by_minute(result["load"])
    kept["samples"] = samples
    kept["replay"] = result["replay"]
    return kept


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = report["faults_executed"]
    lanes = sorted({e["target"] for e in events}, key=lambda t: (t == "postgres", t))
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(14, 8), sharex=True, gridspec_kw={"height_ratios": [2, 3]}
    )
    for event in events:
        lane = lanes.index(event["target"])
        end = event["end"] if event["end"] is not None else event["at"]
        width = max(end - event["at"], 0.4)
        top.barh(lane, width, left=event["at"], height=0.7, color=COLORS.get(event["kind"], "grey"))
    top.set_yticks(range(len(lanes)), lanes, fontsize=7)
    top.set_title(
        f"soak{' on Patroni (sync, strict)' if report.get('ha') else ''}: "
        f"R={report['replicas']} J={report['jobs']} seed {report['seed']}, "
        f"{sum(report['fault_counts'].values())} faults, "
        f"{report['occurrences_checked']} occurrences checked, "
        f"{len(report['violations'])} violations"
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    # beside the lanes, never over them
    top.legend(handles, list(COLORS), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    top.grid(axis="x", alpha=0.3)
    points = report["fire_to_start"]
    if points:
        xs, ys = zip(*points, strict=True)
        bottom.scatter(
            xs,
            [max(y, 1e-3) for y in ys],
            s=3,
            alpha=0.4,
            color="tab:blue",
            label="fire to first start",
        )
        window: list[tuple[float, float]] = []
        p99x, p99y = [], []
        for x, y in points:
            window.append((x, y))
            window = [(a, b) for a, b in window if a > x - 15]
            p99x.append(x)
            p99y.append(max(percentile([b for _, b in window], 0.99) or 1e-3, 1e-3))
        bottom.plot(p99x, p99y, color="tab:red", lw=1, label="p99 over 15 s")
    if report.get("load"):
        load = bottom.twinx()
        xs, ys = zip(*report["load"], strict=True)
        load.plot(xs, ys, color="grey", lw=1, ls="--", label="load average (1 min)")
        load.set_ylabel(f"load average, {os.cpu_count()} cpus", color="grey")
        load.legend(fontsize=8, loc="upper left")
    bottom.set_yscale("log")
    bottom.set_ylabel("fire-to-start latency, s")
    bottom.set_xlabel("seconds since the storm began")
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="claimsched soak: chaos for a long time")
    storm_arguments(parser, ChaosConfig(seed=7, replicas=10, jobs=30, duration=3600.0))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    cfg = storm_config(args, settle_timeout=120.0, pg_settings=(("max_connections", "600"),))
    folder = Path(tempfile.mkdtemp(prefix=f"claimsched-soak-{args.seed}-"))
    print(
        f"soak: R={cfg.replicas} J={cfg.jobs} {cfg.duration:.0f}s of faults, seed {cfg.seed}; "
        f"logs in {folder}",
        file=sys.stderr,
        flush=True,
    )
    started, load_before, sampler = time.time(), os.getloadavg(), LoadSampler()
    report = run_seed(cfg, folder, verbose=True)
    # seconds since the storm began, as every other time of the report
    began = report["storm_began_at"]
    report["load"] = [(round(at - began, 1), load) for at, load in sampler.stop()]
    latencies = [latency for _, latency in report["fire_to_start"]]
    result = {
        "profile": "soak",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "command": " ".join(["python -m bench.soak", *(argv or sys.argv[1:])]),
        # the machine is shared: how busy it was (1, 5, 15 min averages on its cpus)
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in load_before],
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        **{k: v for k, v in report.items() if k not in {"fire_to_start", "faults_planned"}},
        "faults_total": sum(report["fault_counts"].values()),
        "fire_to_start_seconds": {
            "p50": percentile(latencies, 0.5),
            "p90": percentile(latencies, 0.9),
            "p99": percentile(latencies, 0.99),
            "max": max(latencies, default=None),
        },
        "fire_to_start_by_minute": by_minute(report["fire_to_start"]),
        "fire_to_start": report["fire_to_start"],
        "replay": replay_command(report, "bench.soak"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"soak{'-ha' if cfg.ha else ''}-r{cfg.replicas}-j{cfg.jobs}-s{cfg.seed}"
    samples = stem.with_suffix(".samples.json")
    samples.write_text(json.dumps(result, default=str))
    kept = summarize(result, samples.name)
    stem.with_suffix(".json").write_text(json.dumps(kept, indent=1, default=str) + "\n")
    plot(report, stem.with_suffix(".png"))
    print(summary(report))
    print(f"wrote {stem.with_suffix('.json')}, {stem.with_suffix('.png')} and {samples}")
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
