"""What `pip install` brings: distributions and installed size, claimsched beside its peers.

    python -m bench.install_size            # writes bench/results/install-size.json and .png

Each requirement goes into a fresh virtualenv (the wheel built from this checkout for
claimsched); the size is everything pip added to site-packages and bin/, the count is the
number of distributions besides pip itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
#: Peers as users install them: bare, and with what it takes to use Postgres from a slim image
#: (claimsched brings psycopg's binary build; procrastinate needs a libpq; APScheduler a driver
#: and SQLAlchemy for a database job store).
PEERS = {
    "procrastinate": ("procrastinate", ["procrastinate"]),
    "procrastinate + psycopg[binary]": ("procrastinate", ["procrastinate", "psycopg[binary]"]),
    "APScheduler": ("APScheduler", ["APScheduler"]),
    "APScheduler + SQLAlchemy + psycopg[binary]": (
        "APScheduler", ["APScheduler", "SQLAlchemy", "psycopg[binary]"]),
}


def _tree_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _env(venv_bin: Path | None = None) -> dict[str, str]:
    """This environment without anything pointing Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    if venv_bin is not None:
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def measure(distribution: str, requirements: list[str], work: Path) -> dict[str, object]:
    root = work / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    python = root / "bin" / "python"
    site = next((root / "lib").glob("python*/site-packages"))
    before = _tree_size(site) + _tree_size(root / "bin")
    env = _env(root / "bin")
    subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements],
                   check=True, env=env, capture_output=True)
    listed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, sys;"
         "print(m.version(sys.argv[1]));"
         "print('\\n'.join(sorted({d.metadata['Name'] for d in m.distributions()})))",
         distribution], check=True, env=env, capture_output=True, text=True).stdout.split()
    version, names = listed[0], listed[1:]
    added = [n for n in names if n.lower() not in {"pip", "setuptools"}]
    size = _tree_size(site) + _tree_size(root / "bin") - before
    return {"version": version, "distributions": len(added), "names": added,
            "installed_mib": round(size / 2**20, 1)}


def _wheel(work: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work),
                    str(REPO)], check=True, capture_output=True, env=_env())
    return next(work.glob("claimsched-*.whl"))


def run(out: Path = RESULTS) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _wheel(Path(tmp))
        cases = {"claimsched": ("claimsched", [str(wheel)]),
                 "claimsched[operator]": ("claimsched", [f"{wheel}[operator]"]), **PEERS}
        result = {}
        for number, (label, (distribution, requirements)) in enumerate(cases.items()):
            work = Path(tmp) / f"case-{number}"
            work.mkdir()
            result[label] = measure(distribution, requirements, work)
            print(f"{label:44} {result[label]['distributions']:3} distributions "
                  f"{result[label]['installed_mib']:6} MiB", file=sys.stderr)
    path = out / "install-size.json"
    path.write_text(json.dumps({"scenario": "install-size", "python": sys.version.split()[0],
                                "results": result}, indent=2) + "\n")
    _plot(result, out / "install-size.png")
    return path


def _plot(result: dict[str, dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(result)
    sizes = [float(str(result[k]["installed_mib"])) for k in labels]
    counts = [int(str(result[k]["distributions"])) for k in labels]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    colors = ["#2b6cb0" if label.startswith("claimsched") else "#999" for label in labels]
    bars = ax.barh(labels, sizes, color=colors)
    for bar, count in zip(bars, counts, strict=True):
        ax.text(bar.get_width() + 0.5, bar.get_y() + bar.get_height() / 2,
                f"{bar.get_width():.1f} MiB, {count} distributions", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("installed size in a fresh venv (MiB)")
    ax.set_xlim(0, max(sizes) * 1.6)
    ax.set_title("pip install: what each brings", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    print(run())
