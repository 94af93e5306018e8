"""Where a replica's CPU goes: py-spy (not a project dependency: `pip install py-spy`) samples
one replica without stopping it, and `summarize` ranks the functions of the folded stacks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_RUNNING: list[subprocess.Popen[bytes]] = []


def record(replica: Any, seconds: float, path: Path) -> None:
    """Sample `replica` for `seconds` in the background into folded stacks at `path`."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise RuntimeError("--profile needs py-spy: pip install py-spy")
    path.parent.mkdir(parents=True, exist_ok=True)
    _RUNNING.append(
        subprocess.Popen(
            [spy, "record", "--pid", str(replica.pid), "--duration", str(int(seconds)),
             "--rate", "200", "--nonblocking", "--gil", "--format", "raw", "--output", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    )


def wait_all() -> None:
    while _RUNNING:
        _RUNNING.pop().wait(30)


def summarize(path: Path, top: int = 25) -> list[tuple[str, float, float]]:
    """(function, self %, total %) of the samples, by total."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    return [(f, 100 * own[f] / samples, 100 * t / samples) for f, t in total.most_common(top)]


if __name__ == "__main__":
    for name, self_pct, total_pct in summarize(Path(sys.argv[1]), int(sys.argv[2:3][0] if
                                                                       sys.argv[2:] else 30)):
        print(f"{total_pct:6.1f}% {self_pct:6.1f}%  {name}")
