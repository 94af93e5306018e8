"""An earlier release of claimsched, built from this repository's own git history, to run beside
this checkout: the rolling-upgrade test and the chaos storms start its agents.

A release's source comes out of git (`git archive` of its tag, or of the commit the tag names
when the clone fetched no tags), never from the work tree, and is installed as users install it
(`pip install <source>`) into a virtualenv of its own, cached by commit outside the repository
(~/.cache/claimsched/releases/<commit>; CLAIMSCHED_RELEASES names another folder): built once,
reused by every later run. A clone without that history (a shallow clone) cannot build it, and
`MissingRelease` says how to get it: a test that needs the release fails, it never skips.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The release before this one: its tag and the commit the tag names.
PREVIOUS = ("v0.1.0", "6f28556fce5004d2deef03702833b1b1d97215ed")
PIP_TIMEOUT = 600  # seconds: the first build on a machine downloads the dependencies


class MissingRelease(RuntimeError):
    """This clone has neither the release's tag nor its commit."""


@dataclass(frozen=True)
class Release:
    """An installed earlier release: its tag, its commit and its virtualenv."""

    tag: str
    commit: str
    root: Path

    @property
    def version(self) -> str:
        return self.tag.removeprefix("v")

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def command(self, *argv: str) -> list[str]:
        """Its `claimsched` command line with these arguments."""
        return [str(self.python), "-m", "claimsched.cli", *argv]


def isolated_env(**extra: str) -> dict[str, str]:
    """This process's environment without what could point a Python at this checkout's code or
    at claimsched settings (PYTHONPATH, a virtualenv, CLAIMSCHED_*), plus `extra`."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
           and not key.startswith("CLAIMSCHED_")}
    return {**env, **extra}


def previous() -> Release:
    """The release before this one (PREVIOUS), built if this machine has not built it yet."""
    return release(*PREVIOUS)


def release(tag: str, commit: str) -> Release:
    """The release `tag` (or the commit it names), built if this machine has not built it yet."""
    found = _resolve(tag) or _resolve(commit)
    if found is None:
        raise MissingRelease(
            f"claimsched {tag} (commit {commit[:12]}) is not in this clone's history, which the "
            f"rolling-upgrade test builds it from: a shallow clone, or one without that commit. "
            f"Fetch it (`git fetch --unshallow --tags`, or `git fetch origin {tag}`) and run "
            "the test again.")
    cache = Path(os.environ.get("CLAIMSCHED_RELEASES")
                 or Path.home() / ".cache" / "claimsched" / "releases")
    cache.mkdir(parents=True, exist_ok=True)
    built = Release(tag, found, cache / found)
    ready = built.root / "ready"
    with open(cache / f"{found}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test or storm may be building it now
        if not ready.exists():
            _build(built)
            ready.write_text(f"{tag} {found}\n")
    return built


def _resolve(ref: str) -> str | None:
    result = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def _build(built: Release) -> None:
    """A fresh virtualenv at built.root with the release installed from its git source."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", built.commit],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix=f"claimsched-{built.tag}-") as source:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(source, filter="data")
        shutil.rmtree(built.root, ignore_errors=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(built.root)
        pip = subprocess.run(
            [str(built.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             source],
            capture_output=True, text=True, timeout=PIP_TIMEOUT, env=isolated_env(),
            cwd=built.root, check=False)
    if pip.returncode != 0:
        raise RuntimeError(f"installing claimsched {built.tag} failed:\n{pip.stderr[-3000:]}")
