"""What every result carries: when, where, with what; and writing it."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from claimsched.version import __version__

from .cluster import Cluster

RESULTS = Path(__file__).resolve().parent / "results"


def environment(cluster: Cluster) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    ).stdout.strip()
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or None,
        "claimsched": __version__,
        "python": platform.python_version(),
        "postgres": cluster.server_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def finish(result: dict[str, Any], out: Path, name: str) -> Path:
    """Write `<name>.json` (and the caller writes `<name>.png`); returns the JSON path."""
    out.mkdir(parents=True, exist_ok=True)
    result["environment"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def wait_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 1.0))


def per_fire(kinds: dict[str, dict[str, float]], fires: int) -> dict[str, dict[str, float]]:
    """Statement kinds with calls per fire, mean execution and planning time (ms)."""
    out = {}
    for kind, entry in kinds.items():
        calls = int(entry["calls"])
        out[kind] = {
            "calls": calls,
            "per_fire": round(calls / fires, 4) if fires else None,
            "mean_ms": round(entry["total_ms"] / calls, 3) if calls else None,
            "mean_plan_ms": round(entry["plan_ms"] / calls, 3) if calls else None,
            "total_ms": round(entry["total_ms"], 1),
            "rows": int(entry["rows"]),
        }
    return out


def _default_slots() -> int:
    from claimsched.settings import AgentSettings

    return int(AgentSettings.fields["max_concurrency"].default)


DEFAULT_SLOTS = _default_slots()  # the agent's default worker slots, as the replicas run them


def replica_env(max_concurrency: int | None) -> dict[str, str]:
    """The replicas' extra environment: their worker slots, when the scenario sets them."""
    return {"CLAIMSCHED_MAX_CONCURRENCY": str(max_concurrency)} if max_concurrency else {}
