"""The results tables of bench/README.md, built from the JSON files in bench/results/:
one table per scenario, one column per run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
START, END = "<!-- results:start -->", "<!-- results:end -->"
ORDER = [
    "a-r4", "a-r16", "a-r4-standalone", "a-r4-sync", "a-r16-standalone", "a-r16-sync",
    "b-r10", "c-r4", "d-10000", "d-100000", "e-r10-j100000",
]
TITLES = {
    "a": "a: 50 jobs @every 5s, 120 s window (then 90 s idle) unless the column says",
    "b": "b: jobs due at one instant (10,000 since issue 15, 10 ms handlers), 10 replicas",
    "c": "c: claim throughput, 2000 jobs @every 1s, 4 replicas x 200 slots",
    "d": "d: operator status refresh, 10,000 and 100,000 ClaimSchedules",
    "e": "e: 100,000 schedules (99,000 daily, 1,000 @every 1s..60s), 10 replicas",
    "f": "f: a backfill of 1,000 past occurrences drains (Allow, 10 ms handlers)",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        return " / ".join(_fmt(v) for v in value)
    return str(value)


def _label(metric: str) -> str:
    return re.sub(r"\s*\(R=\d+\)", "", metric)


def _context(result: dict[str, Any]) -> list[tuple[str, Any]]:
    """Measurements without a target, shown for context."""
    s = result["scenario"]
    errors = sum(result.get("problems", {}).get("server_errors", {}).values())
    if s == "a":
        lat = result["latency"]
        first = lat.get("first_claim_of_replica", {})
        rounds = lat.get("claim_statements_per_replica_per_instant", {})
        return [
            ("handler p50 / p95 / max ms",
             [lat["handler_start"]["p50_ms"], lat["handler_start"]["p95_ms"],
              lat["handler_start"]["max_ms"]]),
            ("claim began (started_at) p50 / p99 ms",
             [lat["claim_started_at"]["p50_ms"], lat["claim_started_at"]["p99_ms"]]),
            ("first claim of a replica p50 / p99 ms", [first.get("p50_ms"), first.get("p99_ms")]),
            ("claiming rounds per replica per instant", rounds.get("mean")),
            ("claim statement exec + plan ms", _claim_ms(result)),
            ("CPU s per replica per minute, idle",
             result["cpu_s_per_replica_per_min"]["idle_mean"]),
            ("Postgres CPU s per minute", result["db_cpu_s_per_min"]),
            ("deadlocks / server errors", errors),
        ]
    if s == "b":
        lat = result["latency"]["handler_start"]
        return [
            ("handler p50 / p99 ms", [lat["p50_ms"], lat["p99_ms"]]),
            ("runs per replica: min / fair share", result["spread"]["min_over_fair"]),
            ("statements per fire", result["statements"]["per_fire"]),
            ("claim statements", _calls(result, "claim")),
            ("claim statement exec + plan ms", _claim_ms(result)),
            ("deadlocks / server errors", errors),
        ]
    if s == "c":
        agents = result["agents"]
        rows: list[tuple[str, Any]] = [
            ("agents: claims/s", agents["claims_per_s"]),
            ("agents: skipped rows/s (missed occurrences)",
             round(agents["rows_by_status"].get("skipped", 0) / result["params"]["window_s"], 1)),
            ("agents: rows per claim statement", agents["rows_per_claim_statement"]),
            ("claim statement exec + plan ms", _claim_ms(result)),
            ("ratio is to", result["ratio_to"]),
            ("deadlocks / server errors", errors),
        ]
        rows += [(f"pgbench {label}: rows/s", e["rows_per_s"])
                 for label, e in result["pgbench"].items()]
        return rows
    if s == "e":
        lat = result["latency"]
        return [
            ("frequent jobs: fire-to-start p50 / p95 / max ms",
             [lat["frequent"]["p50_ms"], lat["frequent"]["p95_ms"], lat["frequent"]["max_ms"]]),
            ("daily jobs in the window: n / p99 ms",
             [lat["daily"]["n"], lat["daily"]["p99_ms"]]),
            ("CPU s per replica per minute (mean)", result["cpu_s_per_replica_per_min"]["mean"]),
            ("change visible s (each)", [c["visible_s"] for c in result["changes"]]),
            ("load average at each change", [c["loadavg"] for c in result["changes"]]),
            ("statements per fire", result["statements"]["per_fire"]),
            ("Postgres CPU s per minute", result["db_cpu_s_per_min"]),
            ("startup s (until every replica announced itself)", result.get("startup_s")),
            ("deadlocks / server errors", errors),
        ]
    if s == "f":
        done = result["done_at_s"]
        return [
            ("runs done at 10% / 50% / 90%, s", [done["10%"], done["50%"], done["90%"]]),
            ("queue to handler start p50 / p99 ms",
             [result["latency"]["queue_to_start"]["p50_ms"],
              result["latency"]["queue_to_start"]["p99_ms"]]),
            ("runs per replica", list(result["runs"]["per_replica"].values())),
            ("statements per run", result["statements"]["per_run"]),
            ("reclaim statements", _calls(result, "reclaim")),
            ("deadlocks / server errors", errors),
        ]
    largest = result["sizes"][-1]
    return [
        ("warm refresh: SQL execution ms", largest["warm_sql_exec_ms"]),
        ("warm refresh: the rest (Python) s", largest["warm_rest_s"]),
    ] + [(f"{size['schedules']} schedules: warm / cold s",
          [size["warm_s"]["mean"], size["cold_s"]]) for size in result["sizes"][:-1]]


def _calls(result: dict[str, Any], kind: str) -> int:
    kinds = result["statements"]["by_kind"]
    return sum(int(v["calls"]) for k, v in kinds.items() if k.split()[0] == kind)


def _claim_ms(result: dict[str, Any]) -> list[Any]:
    for kind, entry in result["statements"]["by_kind"].items():
        if kind.split()[0] == "claim":
            return [entry["mean_ms"], entry.get("mean_plan_ms")]
    return [None, None]


def _setup(result: dict[str, Any]) -> list[tuple[str, Any]]:
    p = result["params"]
    env = result["environment"]
    rows = []
    if "replicas" in p:
        slots = re.sub(r"agent default \((\d+)\)", r"\1 (default)", str(p["max_concurrency"]))
        rows.append(("replicas x worker slots", f"{p['replicas']} x {slots}"))
    rows.append(("commit / load average at start",
                 f"{env['commit']} / {env['loadavg_at_start'][0]}"))
    if result["scenario"] == "a":
        sync = str(p.get("database", "")).startswith("Patroni")
        rows.append(("database / window / idle window s",
                     f"{'sync standby' if sync else 'standalone'} / {_fmt(p['window_s'])} / "
                     f"{_fmt(p['idle_window_s'])}"))
    return rows


def scenario_table(results: list[dict[str, Any]]) -> str:
    names = [r["name"] for r in results]
    lines = ["| | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    rows: dict[str, list[str]] = {}
    targets: dict[str, set[str]] = {}
    for index, result in enumerate(results):
        for label, value in _setup(result):
            rows.setdefault(label, [""] * len(results))[index] = _fmt(value)
        for check in result["targets"]:
            label = _label(check["metric"])
            mark = "met" if check["met"] else "**missed**"
            rows.setdefault(label, [""] * len(results))[index] = f"{_fmt(check['value'])} {mark}"
            targets.setdefault(label, set()).add(check["target"])
        for label, value in _context(result):
            rows.setdefault(label, [""] * len(results))[index] = _fmt(value)
    for label, cells in rows.items():
        target = " / ".join(sorted(targets.get(label, ())))
        shown = f"{label} (target {target})" if target else label
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(folder: Path = HERE / "results") -> str:
    found = {}
    for path in sorted(folder.glob("*.json")):
        result = json.loads(path.read_text())
        if result.get("scenario") in TITLES:  # not other tools' reports
            found[path.stem] = result
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    parts = []
    for scenario, title in TITLES.items():
        group = [found[n] for n in names if found[n]["scenario"] == scenario]
        if group:
            parts += [f"**{title}**", "", scenario_table(group), ""]
    return "\n".join(parts).rstrip()


def update_readme(path: Path = HERE / "README.md") -> str:
    text = path.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{START}\n{table()}\n{END}{tail}")
    return f"updated {path}"
