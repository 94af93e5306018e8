"""`python -m bench run {a,b,c,d,e,f} [options]` writes bench/results/<name>.json and .png;
`python -m bench report` rewrites the results table in bench/README.md."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario")
    run.add_argument("scenario", choices=["a", "b", "c", "d", "e", "f"])
    run.add_argument("--replicas", "-R", type=int,
                     help="agent processes (a: 4, b: 10, c: 4, e: 10, f: 3, f drain: 4)")
    run.add_argument("--jobs", "-J", type=int,
                     help="jobs (a: 50, b: 10000, c: 2000, d: 10000, e: 100000)")
    run.add_argument("--period", type=int, help="@every period, seconds (a: 5, b: 30, c: 1)")
    run.add_argument("--window", type=float,
                     help="measured window, seconds (a: 120, c: 30, e: 120)")
    run.add_argument("--idle-window", type=float, help="a: idle window, seconds (90)")
    run.add_argument("--warmup", type=float, help="seconds before the window (a: 10, c: 5, e: 20)")
    run.add_argument("--handler-ms", type=float,
                     help="b, f: each handler sleeps this long (10)")
    run.add_argument("--max-concurrency", type=int,
                     help="agents' worker slots (agent default; f: 16)")
    run.add_argument("--backlog", type=int, help="f: past occurrences backfilled (1000)")
    run.add_argument("--handoff", type=float,
                     help="a: replicas' CLAIMSCHED_HANDOFF_SECONDS (agent default; 0: no turns)")
    run.add_argument("--pgbench-seconds", type=float, help="c: seconds per pgbench run (10)")
    run.add_argument("--refreshes", type=int, help="d: warm refreshes to time (5)")
    run.add_argument("--history-days", type=int, help="d: schedules active since N days (7)")
    run.add_argument("--changes", type=int, help="e: schedule changes to time (5)")
    run.add_argument("--profile", action="store_true", default=None,
                     help="a, e: py-spy records replica r00 (steady, a: and idle) to "
                     "<name>-*.folded")
    run.add_argument("--sync", action="store_true", default=None,
                     help="a: on a Patroni cluster, a synchronous standby attached (<name>-sync)")
    run.add_argument("--part", choices=["all", "restart", "fleet", "drain"],
                     help="f: one part (all: restart, fleet, then drain)")
    run.add_argument("--kills", type=int, help="f: SIGKILLs per lease setting (50)")
    run.add_argument("--trials", type=int, help="f: reclaimers paused past their lease (10)")
    run.add_argument("--out", type=Path, help="result folder (bench/results)")
    run.add_argument("--name", help="result file name without extension")
    sub.add_parser("report", help="rewrite the table in bench/README.md from bench/results")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "report":
        from . import report

        print(report.update_readme())
        return 0
    options = {
        key: value
        for key, value in vars(args).items()
        if key not in {"command", "scenario"} and value is not None
    }
    if args.scenario == "a":
        from .steady import run
    elif args.scenario == "b":
        from .herd import run
    elif args.scenario == "c":
        from .throughput import run
    elif args.scenario == "d":
        from .status import run
    elif args.scenario == "e":
        from .many import run
    else:
        from .recovery import run
    for path in run(**options) if args.scenario == "f" else [run(**options)]:
        result = json.loads(path.read_text())
        for check in result.get("targets", []):
            mark = "met   " if check["met"] else "MISSED"
            print(f"{mark} {check['metric']}: {check['value']} (target {check['target']})")
        print(f"wrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
