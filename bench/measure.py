"""Small statistics: percentiles, latency summaries, duplicates and misses, targets."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .replicas import Start


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, Any]:
    """p50/p95/p99/max (and min, mean) of latencies given in seconds, reported in ms."""
    if not seconds:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "n": len(seconds),
        "min_ms": round(min(seconds) * 1000, 2),
        "mean_ms": round(sum(seconds) / len(seconds) * 1000, 2),
        "p50_ms": round(percentile(seconds, 50) * 1000, 2),
        "p95_ms": round(percentile(seconds, 95) * 1000, 2),
        "p99_ms": round(percentile(seconds, 99) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
    }


def every_instants(period: float, start: float, end: float) -> list[float]:
    """`@every <period>` fire instants (anchored at the epoch) in [start, end)."""
    first = math.ceil(start / period - 1e-9)
    last = math.ceil(end / period - 1e-9)
    return [k * period for k in range(first, last)]


def next_instant(period: float, after: float) -> float:
    return (math.floor(after / period) + 1) * period


def occurrences(
    starts: Iterable[Start], jobs: Sequence[str], instants: Sequence[float]
) -> dict[str, Any]:
    """Handler starts of the expected occurrences: first start of each, duplicates, misses."""
    wanted = {round(t, 3) for t in instants}
    names = set(jobs)
    counted: Counter[tuple[str, float]] = Counter()
    first: dict[tuple[str, float], Start] = {}
    for start in starts:
        key = (start.job, round(start.fire_time, 3))
        if start.job not in names or key[1] not in wanted:
            continue
        counted[key] += 1
        if key not in first or start.started < first[key].started:
            first[key] = start
    expected = len(names) * len(wanted)
    return {
        "expected": expected,
        "started": len(first),
        "duplicates": sum(n - 1 for n in counted.values() if n > 1),
        "missed": expected - len(first),
        "first": first,
    }


def target(metric: str, value: float | None, limit: float, better: str = "lower") -> dict[str, Any]:
    """A target check: met when value <= limit (or >= for better='higher')."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        met = False
    else:
        met = value <= limit if better == "lower" else value >= limit
    op = "<=" if better == "lower" else ">="
    return {"metric": metric, "value": value, "target": f"{op} {limit:g}", "met": met}
