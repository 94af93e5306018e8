"""The benchmark harness still works: each scenario, tiny and short, through `python -m bench`.

Not a measurement (bench/ is run on demand): only that a result with the expected keys and a
plot come out, and that no occurrence ran twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

TINY = {
    "a": ["--replicas", "2", "--jobs", "3", "--period", "1", "--window", "3",
          "--idle-window", "2", "--warmup", "1"],
    "b": ["--replicas", "2", "--jobs", "20", "--period", "2"],
    "c": ["--replicas", "2", "--jobs", "100", "--window", "3", "--warmup", "1",
          "--max-concurrency", "20", "--pgbench-seconds", "1"],
    "d": ["--jobs", "40", "--refreshes", "1", "--history-days", "2"],
    "e": ["--replicas", "2", "--jobs", "200", "--window", "4", "--warmup", "1", "--changes", "1"],
    "f": ["--part", "drain", "--replicas", "2", "--backlog", "40", "--max-concurrency", "4"],
}
KEYS = {
    "a": ["latency", "statements", "idle", "cpu_s_per_replica_per_min", "rss_mib_per_replica",
          "fires", "replicas"],
    "b": ["latency", "last_start_s", "spread", "statements", "fires"],
    "c": ["agents", "pgbench", "ratio", "statements", "replicas"],
    "d": ["sizes"],
    "e": ["latency", "fires", "changes", "replicas", "statements"],
    "f": ["drained_s", "done_at_s", "latency", "runs", "statements", "replicas"],
}


def _bench(scenario: str, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", scenario, *TINY[scenario], "--out", str(out),
         "--name", scenario],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / f"{scenario}.png").stat().st_size > 0
    result: dict[str, Any] = json.loads((out / f"{scenario}.json").read_text())
    return result


@pytest.mark.parametrize("scenario", ["a", "b", "c", "d", "e", "f"])
def test_each_scenario_writes_a_result_and_a_plot(scenario: str, tmp_path: Path) -> None:
    result = _bench(scenario, tmp_path)
    assert result["scenario"] == scenario
    for key in ["params", "environment", "targets", *KEYS[scenario]]:
        assert key in result, key
    assert all({"metric", "value", "target", "met"} <= set(t) for t in result["targets"])
    if scenario == "a":
        assert result["fires"]["duplicates"] == 0
        assert result["fires"]["started"] > 0
        assert result["latency"]["handler_start"]["p99_ms"] is not None
        assert result["statements"]["by_kind"]["claim"]["calls"] > 0
    if scenario == "b":
        assert result["fires"]["duplicates"] == 0
        assert result["fires"]["missed"] == 0
    if scenario == "c":
        assert result["agents"]["duplicates"] == 0
        assert result["agents"]["claims_per_s"] > 0
        assert result["pgbench"]
    if scenario == "d":
        assert all(size["statements_per_refresh"] >= 1 for size in result["sizes"])
    if scenario == "e":
        assert result["fires"]["duplicates"] == 0 and result["fires"]["started"] > 0
        assert result["changes"][0]["visible_s"] is not None
        assert result["changes"][0]["rows_per_replica"] >= 1
    if scenario == "f":
        assert result["runs"]["duplicates"] == 0 and result["drained_s"] is not None
        assert result["runs"]["started"] == 40


def test_the_soak_versions_a_summary_and_keeps_the_raw_samples_apart(tmp_path: Path) -> None:
    done = subprocess.run(
        # two quick fault kinds: the storm itself is tests/chaos/test_randomized.py's
        [sys.executable, "-m", "bench.soak", "--replicas", "2", "--jobs", "3", "--duration", "5",
         "--seed", "3", "--kinds", "sigterm,skew", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stem = tmp_path / "soak-r2-j3-s3"
    summary: dict[str, Any] = json.loads(stem.with_suffix(".json").read_text())
    samples: dict[str, Any] = json.loads(stem.with_suffix(".samples.json").read_text())
    assert stem.with_suffix(".png").stat().st_size > 0
    assert not {"fire_to_start", "faults_executed", "faults_planned", "load"} & set(summary)
    assert summary["load_by_minute"] and samples["load"]  # the machine is shared
    assert summary["samples"] == "soak-r2-j3-s3.samples.json"
    assert samples["fire_to_start"] and samples["faults_executed"]
    assert sum(m["faults"] for m in summary["faults_by_minute"]) == len(samples["faults_executed"])
    assert sum(m["occurrences"] for m in summary["fire_to_start_by_minute"]) == len(
        samples["fire_to_start"])
    assert summary["fire_to_start_seconds"]["p50"] is not None
    assert summary["violations_found"] == 0 and summary["occurrences_checked"] > 0
