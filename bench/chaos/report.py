"""What a storm's report says: its violations by kind, the most faults at once, the summary a
person reads, and the command that replays it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .faults import Event
from .kinds import ALL_KINDS, default_kinds

VIOLATION_KINDS = {
    # recovery_checks.py (their lines name attempts: before the patterns below)
    "while the whole fleet was down (": "harness failure",
    "while the whole fleet was down and": "Latest did not run the newest missed occurrence",
    "without a job_attempts row": "superseded attempt not kept",
    "was kept as": "superseded attempt kept wrong",
    "kept, but no later attempt": "superseded attempt of a run not superseded",
    "never finished by a later attempt": "fenced-out attempt never finished",
    "was superseded as": "paused or killed attempt superseded wrong",
    "neither superseded nor finished": "paused or killed attempt left behind",
    "do not allow": "skipped against its policies",
    "in progress at once": "Forbid runs in progress at once",
    "at work at once": "Forbid handlers at work at once",
    "whose handler failed": "done though its handler failed",
    "finished during an outage": "late completion lost",
    "was granted (": "receipt committed after a later attempt began",
    "idempotency keys": "idempotency key not stable",
    "backfill command crashed": "CLI traceback",
    "happened twice": "duplicate effect",
    "claimed twice": "occurrence claimed twice",
    "completed as done": "two completions",
    "ran twice": "one attempt ran twice",
    "without being granted": "ran without a lease",
    "never granted": "effect without a lease",
    "has no receipt": "effect without receipt",
    "without the app's write": "receipt without effect",
    "done without its": "done without its effects",
    "never ran and was never recorded": "missed occurrence",
    "never caught up": "did not catch up",
    "still running past its lease": "running past its lease",
    "left ": "unfinished at the end",
    "retry never ran": "retry never ran",
    "failed for good after": "gave up before max attempts",
    "without a reason": "skipped without a reason",
    "without an error": "failed without an error",
    "maintenance moved": "history changed by maintenance",
    "history changed": "history changed by maintenance",
    "deleted and never put back": "history lost",
    "finished run": "history changed",
    "attempt ": "fencing token jumped",
    "owner without": "owner changed without a new token",
    "did not stop": "shutdown hang",
    "exited": "replica crashed",
    "harness": "harness failure",
}


def violation_kinds(violations: list[str]) -> dict[str, int]:
    kinds: Counter[str] = Counter()
    for text in violations:
        head = text.split("\n", 1)[0]
        kinds[next((k for p, k in VIOLATION_KINDS.items() if p in head), "other")] += 1
    return dict(kinds)


def max_overlap(events: list[Event]) -> int:
    edges = []
    for e in events:
        if e.kind in ALL_KINDS and e.kind != "skew" and e.end is not None and e.happened:
            edges += [(e.at, 1), (e.end, -1)]
    level = peak = 0
    for _, step in sorted(edges, key=lambda x: (x[0], x[1])):
        level += step
        peak = max(peak, level)
    return peak


def summary(report: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in report["fault_counts"].items())
    lines = [
        f"seed {report['seed']}: R={report['replicas']} J={report['jobs']} "
        f"faults for {report['fault_seconds']}s ({counts}; up to "
        f"{report['max_concurrent_faults']} at once), {report['occurrences_checked']} "
        f"occurrences checked, {report.get('rows', 0)} rows, "
        f"{len(report['violations'])} violation(s), {report['elapsed_seconds']}s",
    ]
    superseded = {k.removeprefix("superseded_"): v for k, v in report.items()
                  if k.startswith("superseded_")}
    if superseded:
        lines.append(f"  superseded attempts by outcome: {superseded}")
    if report.get("faults_missed"):
        lines.append(f"  faults that found nothing to act on: {report['faults_missed']}")
    if report["violations"]:
        lines.append(f"  kinds: {report['violation_kinds']}")
    for violation in report["violations"][:30]:
        lines.append(f"  - {violation}")
    if report["violations"]:
        lines.append(f"  replay: {replay_command(report)}")
        lines.append(f"  logs: {report['logs']}")
    return "\n".join(lines)


def replay_command(report: dict[str, Any], program: str = "bench.chaos") -> str:
    return (
        f"python -m {program} --seed {report['seed']} --replicas {report['replicas']} "
        f"--jobs {report['jobs']} --duration {report['fault_seconds']:g}"
        + replay_options(report)
    )


def replay_options(report: dict[str, Any]) -> str:
    """The options beyond size and seed that a replay of `report` needs."""
    ha = bool(report.get("ha"))
    kinds = tuple(report.get("kinds") or default_kinds(ha))
    return (
        (" --ha" if ha else "")
        + (f" --kinds {','.join(kinds)}" if kinds != default_kinds(ha) else "")
        + (" --lapse-partitions" if report.get("lapse_partitions") else "")
    )
