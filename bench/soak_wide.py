"""The wide soak: 1,000 light jobs @every 1s beside the chaos storm's jobs and faults.

    python -m bench.soak_wide --seed 11 --replicas 6 --jobs 24 --light 1000 --duration 1080

R real agent processes run J storm jobs (checked per occurrence, bench/chaos/checker.py) and L
light jobs @every 1s (one cheap effect each, checked in SQL over the whole ledger:
bench/chaos/wide.py) while the storm's seeded faults overlap for `duration` seconds; then every
fault is healed, the run settles and every check runs. Writes bench/results/soak-wide-...json
(the summary: occurrences checked, faults by kind, violations by check and the first ones,
fire-to-effect percentiles, effects and load by minute), .png, and .samples.json (raw, ignored
by git). Exit status 1 when anything was violated; the report says how to replay the seed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .chaos.cli import storm_arguments, storm_config
from .chaos.config import ChaosConfig
from .chaos.kinds import PARTITION, default_kinds
from .chaos.report import replay_command, summary
from .chaos.wide import WideRun
from .soak import COLORS, RESULTS, LoadSampler, summarize

RAW_WIDE = ("light_by_second", "effects_per_second")


def per_minute(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Effects committed and the light jobs' fire-to-effect p99/max, by minute of the storm."""
    minutes: dict[int, dict[str, Any]] = defaultdict(lambda: {"effects": 0, "p99_max": 0.0,
                                                              "max": 0.0})
    for at, n in report["effects_per_second"]:
        minutes[int(at // 60)]["effects"] += n
    for fire, _n, _p50, p99, top in report["light_by_second"]:
        bucket = minutes[int(fire // 60)]
        bucket["p99_max"] = max(bucket["p99_max"], round(p99, 3))
        bucket["max"] = max(bucket["max"], round(top, 3))
    return [{"minute": m, **v} for m, v in sorted(minutes.items())]


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = report["faults_executed"]
    lanes = sorted({e["target"] for e in events}, key=lambda t: (t == "postgres", t))
    fig, (top, mid, bottom) = plt.subplots(
        3, 1, figsize=(14, 10), sharex=True, gridspec_kw={"height_ratios": [2, 2, 2]}
    )
    for event in events:
        end = event["end"] if event["end"] is not None else event["at"]
        top.barh(lanes.index(event["target"]), max(end - event["at"], 0.4), left=event["at"],
                 height=0.7, color=COLORS.get(event["kind"], "grey"))
    top.set_yticks(range(len(lanes)), lanes, fontsize=7)
    top.set_title(
        f"wide soak: R={report['replicas']}, {report['light_jobs']} light jobs @every 1s + "
        f"{report['jobs']} storm jobs, seed {report['seed']}: {report['faults_total']} faults, "
        f"{report['occurrences_checked']:,} occurrences checked, "
        f"{len(report['violations'])} violations"
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    top.legend(handles, list(COLORS), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if report["effects_per_second"]:
        xs, ys = zip(*report["effects_per_second"], strict=True)
        mid.plot(xs, ys, lw=0.6, color="tab:green", label="light effects committed per second")
        mid.axhline(report["light_jobs"], color="grey", ls=":", lw=1, label="due per second")
    mid.set_ylabel("effects / s")
    mid.legend(fontsize=8, loc="upper left")
    if report.get("load"):
        load = mid.twinx()
        lx, ly = zip(*report["load"], strict=True)
        load.plot(lx, ly, color="grey", lw=1, ls="--")
        load.set_ylabel(f"load average (1 min), {os.cpu_count()} cpus", color="grey")
    if report["light_by_second"]:
        fire = [r[0] for r in report["light_by_second"]]
        for index, label, color in ((2, "p50", "tab:blue"), (3, "p99", "tab:orange"),
                                    (4, "max", "tab:red")):
            bottom.plot(fire, [max(r[index], 1e-3) for r in report["light_by_second"]], lw=0.6,
                        color=color, label=f"fire to effect, {label} of each second")
    bottom.set_yscale("log")
    bottom.set_ylabel("seconds")
    bottom.set_xlabel("seconds since the storm began")
    bottom.legend(fontsize=8, loc="upper left")
    for axis in (top, mid, bottom):
        axis.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    storm_arguments(parser, ChaosConfig(seed=11, replicas=6, jobs=24, duration=1080.0))
    parser.add_argument("--light", type=int, default=1000, help="light jobs @every 1s")
    parser.add_argument("--concurrency", type=int, default=48, help="handlers per replica")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.kinds is None:  # every kind the database allows, partitions too
        args.kinds = ",".join(dict.fromkeys((*default_kinds(args.ha), PARTITION)))
    cfg = storm_config(args, settle_timeout=300.0, max_concurrency=args.concurrency,
                       pg_settings=(("max_connections", "800"),))
    folder = Path(tempfile.mkdtemp(prefix=f"claimsched-soak-wide-{args.seed}-"))
    print(f"soak-wide: R={cfg.replicas} J={cfg.jobs} L={args.light} {cfg.duration:.0f}s of "
          f"faults, seed {cfg.seed}; logs in {folder}", file=sys.stderr, flush=True)
    started, load_before, sampler = time.time(), os.getloadavg(), LoadSampler()
    report = WideRun(cfg, folder, args.light, lambda t: print(t, file=sys.stderr, flush=True)).run()
    began = report["storm_began_at"]
    report["load"] = [(round(at - began, 1), load) for at, load in sampler.stop()]
    result = {
        "profile": "soak-wide",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "command": " ".join(["python -m bench.soak_wide", *(argv or sys.argv[1:])]),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in load_before],
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        **{k: v for k, v in report.items() if k != "faults_planned"},
        "faults_total": sum(report["fault_counts"].values()),
        "replay": replay_command(report, "bench.soak_wide") + f" --light {args.light}",
    }
    result["by_minute"] = per_minute(result)
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"soak-wide{'-ha' if cfg.ha else ''}-r{cfg.replicas}-l{args.light}-s{cfg.seed}"
    stem = args.out / name
    samples = stem.with_suffix(".samples.json")
    samples.write_text(json.dumps(result, default=str))
    kept = summarize({k: v for k, v in result.items() if k not in RAW_WIDE}, samples.name)
    stem.with_suffix(".json").write_text(json.dumps(kept, indent=1, default=str) + "\n")
    plot(result, stem.with_suffix(".png"))
    print(summary(report))
    print(f"occurrences checked: {result['occurrences_checked']:,} "
          f"(light {result['light_occurrences_checked']:,}); violations by check: "
          f"{result['light_checks']}")
    print(f"wrote {stem.with_suffix('.json')}, {stem.with_suffix('.png')} and {samples}")
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
