"""What users install, made the way users make it: the sdist and the wheel built from this
checkout, and fresh virtualenvs outside the repository with the wheel installed (never editable).

Everything here runs through the fresh venv's own executables, with an environment that cannot
reach the checkout (no PYTHONPATH, a working directory outside the repository)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 600  # seconds; the first install on a machine downloads the dependencies


def source_files() -> list[str]:
    """The files a clean clone has, plus new ones not yet committed (never ignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    return [name for name in listed if name and (REPO / name).is_file()]


def copy_checkout(target: Path) -> Path:
    """A copy of the checkout's files, so building never writes into the repository."""
    for name in source_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination)
    return target


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


def build(source: Path, out: Path) -> Dist:
    """`python -m build`: the sdist first, then the wheel built from that sdist."""
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=PIP_TIMEOUT, env=clean_env(),
    )
    assert result.returncode == 0, f"build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dist(sdist=sdist, wheel=wheel)


def clean_env(path_first: Path | None = None, **extra: str) -> dict[str, str]:
    """The caller's environment without anything that could point Python at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP"}
           and not k.startswith("CLAIMSCHED_")}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@dataclass(frozen=True)
class Venv:
    """A virtualenv outside the repository, used only through its own executables."""

    root: Path

    @classmethod
    def create(cls, root: Path) -> Venv:
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        return cls(root)

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(self.root / "bin", VIRTUAL_ENV=str(self.root), **extra)

    def pip_install(self, *requirements: str) -> None:
        result = subprocess.run(
            [str(self.bin("python")), "-m", "pip", "install", "-q",
             "--disable-pip-version-check", *requirements],
            capture_output=True, text=True, timeout=PIP_TIMEOUT, env=self.env(), cwd=self.root,
        )
        assert result.returncode == 0, f"pip install failed:\n{result.stderr[-3000:]}"

    def run(self, *argv: str, cwd: Path | None = None, timeout: float = 120,
            **env: str) -> subprocess.CompletedProcess[str]:
        """Run one of the venv's executables (argv[0]) to completion."""
        return subprocess.run(
            [str(self.bin(argv[0])), *argv[1:]], capture_output=True, text=True,
            timeout=timeout, env=self.env(**env), cwd=cwd or self.root,
        )

    def distributions(self) -> set[str]:
        """Normalised names of every distribution installed in the venv."""
        result = self.run("python", "-c",
                          "import importlib.metadata as m;"
                          "print('\\n'.join(d.metadata['Name'] for d in m.distributions()))")
        assert result.returncode == 0, result.stderr
        return {name.strip().lower().replace("_", "-") for name in result.stdout.split()}
