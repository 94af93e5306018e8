"""Randomized chaos: R real agent processes, J jobs, random overlapping faults, then invariants.

The options of a storm (storm_arguments, shared with the soaks in bench/soak.py and
bench/soak_wide.py), the ChaosConfig they describe, and `python -m bench.chaos`.

Replay a seed: python -m bench.chaos --seed 31 --replicas 5 --jobs 20 --duration 22
(with --ha on a synchronous Patroni cluster, where failovers replace the standalone server's
restarts and outages; see bench/chaos/__init__.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .config import ChaosConfig
from .kinds import ALL_KINDS, default_kinds
from .report import summary
from .storm import ChaosRun, run_seed


def storm_arguments(
    parser: argparse.ArgumentParser, defaults: ChaosConfig
) -> argparse.ArgumentParser:
    """The options of a storm (the replay here, the soak in bench/soak.py), with `defaults`."""
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--replicas", type=int, default=defaults.replicas)
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--duration", type=float, default=defaults.duration,
                        help="seconds of faults")
    parser.add_argument("--fault-rate", type=float, default=defaults.fault_rate,
                        help="faults per second")
    parser.add_argument("--kinds", help="fault kinds to draw (default: every kind the database "
                        f"allows; all: {','.join(ALL_KINDS)})")
    parser.add_argument("--lapse-partitions", action="store_true",
                        help="let maintenance move rows (exposes the partition-move race)")
    parser.add_argument("--ha", action="store_true",
                        help="on a Patroni cluster (2 nodes, synchronous, strict): failover "
                        "faults instead of the standalone server's restarts and outages")
    return parser


def storm_config(args: argparse.Namespace, **more: Any) -> ChaosConfig:
    """The ChaosConfig the options of storm_arguments() describe, and `more`; bad options exit
    with a one-line error."""
    if args.kinds is None:
        kinds = default_kinds(args.ha)
    else:
        kinds = tuple(k for k in args.kinds.split(",") if k)
    try:
        return ChaosConfig(
            seed=args.seed,
            replicas=args.replicas,
            jobs=args.jobs,
            duration=args.duration,
            fault_rate=args.fault_rate,
            kinds=kinds,
            lapse_partitions=args.lapse_partitions,
            ha=args.ha,
            **more,
        )
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = storm_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                             ChaosConfig(seed=0))
    parser.add_argument("--plan", action="store_true", help="print the plan only")
    args = parser.parse_args(argv)
    cfg = storm_config(args)
    if args.plan:
        run = ChaosRun(cfg, Path(tempfile.mkdtemp()))
        print(
            json.dumps(
                {"jobs": run.jobs, "skewed": run.skewed, "faults": [asdict(f) for f in run.faults]},
                indent=1,
            )
        )
        return 0
    report = run_seed(cfg, verbose=True)
    print(summary(report))
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
