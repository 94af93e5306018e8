"""The results table of bench/README.md, built from the JSON files in bench/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
START, END = "<!-- results:start -->", "<!-- results:end -->"
ORDER = ["a-r4", "a-r16", "b-r10", "c-r4", "d-10000"]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _rows(result: dict[str, Any]) -> list[str]:
    name = result["name"]
    rows = []
    for check in result["targets"]:
        mark = "met" if check["met"] else "**missed**"
        rows.append(f"| {name} | {check['metric']} | {_fmt(check['value'])} | "
                    f"{check['target']} | {mark} |")
    for metric, value in _extra(result):
        rows.append(f"| {name} | {metric} | {_fmt(value)} | | |")
    return rows


def _extra(result: dict[str, Any]) -> list[tuple[str, Any]]:
    """Measurements without a target, shown for context."""
    s = result["scenario"]
    if s == "a":
        lat = result["latency"]["handler_start"]
        claim = result["latency"]["claim_started_at"]
        return [
            ("handler p50 / p95 / max ms", [lat["p50_ms"], lat["p95_ms"], lat["max_ms"]]),
            ("claim (started_at) p50 / p99 ms", [claim["p50_ms"], claim["p99_ms"]]),
            ("CPU s per replica per minute, idle",
             result["cpu_s_per_replica_per_min"]["idle_mean"]),
            ("Postgres CPU s per minute", result["db_cpu_s_per_min"]),
            ("server errors", sum(result["problems"]["server_errors"].values())),
        ]
    if s == "b":
        lat = result["latency"]["handler_start"]
        return [
            ("handler p50 / p99 ms", [lat["p50_ms"], lat["p99_ms"]]),
            ("runs per replica min / fair share", result["spread"]["min_over_fair"]),
            ("statements per fire", result["statements"]["per_fire"]),
            ("server errors", sum(result["problems"]["server_errors"].values())),
        ]
    if s == "c":
        rows: list[tuple[str, Any]] = [
            ("agents: claims/s", result["agents"]["claims_per_s"]),
            ("agents: rows per claim statement", result["agents"]["rows_per_claim_statement"]),
        ]
        rows += [(f"pgbench {label}: rows/s", e["rows_per_s"])
                 for label, e in result["pgbench"].items()]
        return rows
    largest = result["sizes"][-1]
    return [
        ("refresh: SQL execution ms (warm)", largest["warm_sql_exec_ms"]),
        ("refresh: rest (Python, transfer) s (warm)", largest["warm_rest_s"]),
    ] + [(f"seconds per refresh, {size['schedules']} schedules (warm / cold)",
          [size["warm_s"]["mean"], size["cold_s"]]) for size in result["sizes"][:-1]]


def table(folder: Path = HERE / "results") -> str:
    found = {}
    for path in sorted(folder.glob("*.json")):
        result = json.loads(path.read_text())
        if result.get("scenario") in {"a", "b", "c", "d"}:  # not other tools' reports
            found[path.stem] = result
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    lines = ["| Run | Metric | Result | Target | |", "| --- | --- | --- | --- | --- |"]
    for name in names:
        lines += _rows(found[name])
    when = sorted({r["environment"]["when"][:10] for r in found.values()})
    commits = sorted({str(r["environment"]["commit"]) for r in found.values()})
    lines.append("")
    lines.append(f"Measured {', '.join(when)} at commit(s) {', '.join(commits)}; "
                 "each run's JSON holds its parameters, environment and load average.")
    return "\n".join(lines)


def update_readme(path: Path = HERE / "README.md") -> str:
    text = path.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{START}\n{table()}\n{END}{tail}")
    return f"updated {path}"
