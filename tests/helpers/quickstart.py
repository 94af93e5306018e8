"""The README's quick start, as a user copies it: its marked blocks, and its shell commands run
by a real bash with the tools they call (pip, docker, kubectl, helm, claimsched) replaced by
stubs that record each call. The tests then carry the recorded calls out against real parts.

A block belongs to the quick start when an HTML comment names it on the line before its fence:

    <!-- quickstart: app.py -->
    ```python
    ...

A name with a file suffix (`app.py`, `daily-report.yaml`) is a file the user saves; any other
name is a shell step, run in the user's one terminal in the order the test asks for.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MARKED_BLOCK = re.compile(
    r"^<!-- quickstart: (?P<name>[\w.-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
FENCE = re.compile(r"^```", re.MULTILINE)
#: The commands the quick start may call; the stubs record them instead of running them.
TOOLS = ("pip", "docker", "kubectl", "helm", "claimsched")
#: The database the quick start's commands name; the tests put a real one in its place.
PLACEHOLDER_DSN = "postgresql://claimsched:PASSWORD@db.example.com:5432/app"

_STUB = """#!{python}
import json, os, sys
argv = [os.path.basename(sys.argv[0]), *sys.argv[1:]]
stdin = sys.stdin.read() if "-" in argv else None
env = {{k: v for k, v in os.environ.items() if k.startswith("CLAIMSCHED_") or k == "PYTHONPATH"}}
with open(os.environ["QUICKSTART_LOG"], "a") as log:
    log.write(json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": env, "stdin": stdin}}) + "\\n")
"""


@dataclass(frozen=True)
class Block:
    name: str
    lang: str
    body: str

    @property
    def is_file(self) -> bool:
        return "." in self.name


@dataclass(frozen=True)
class Call:
    """One command the quick start ran, as the stub saw it."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]  # CLAIMSCHED_* and PYTHONPATH, as the user's shell had them
    stdin: str | None

    def __str__(self) -> str:
        return shlex.join(self.argv)


def section(text: str | None = None) -> str:
    """The README's "Quick start" section, up to the next second-level heading."""
    readme = README.read_text() if text is None else text
    return readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str | None = None) -> dict[str, Block]:
    """The quick start's marked blocks by name, in the README's order."""
    found: dict[str, Block] = {}
    for match in MARKED_BLOCK.finditer(section(text)):
        name = match["name"]
        assert name not in found, f"two quick-start blocks are named {name!r}"
        found[name] = Block(name, match["lang"], match["body"])
    return found


def fences(text: str | None = None) -> int:
    """How many fenced blocks the quick start has, marked or not."""
    return len(FENCE.findall(section(text))) // 2


def checkout(folder: Path) -> Path:
    """A user's checkout of this repository to work in: every top-level entry of the repository
    linked into `folder`, so that the files the quick start writes stay out of the repository."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv"}:
            (folder / entry.name).symlink_to(entry)
    return folder


def save_files(found: dict[str, Block], workdir: Path) -> None:
    for block in found.values():
        if block.is_file:
            (workdir / block.name).write_text(block.body)


def run_steps(found: dict[str, Block], steps: list[str], workdir: Path) -> list[Call]:
    """Run the shell steps in one bash (`set -euo pipefail`), in the order given, in `workdir`,
    with TOOLS stubbed; returns every call the stubs recorded, in order."""
    stubs = workdir.parent / "quickstart-bin"
    stubs.mkdir(exist_ok=True)
    for tool in TOOLS:
        stub = stubs / tool
        stub.write_text(_STUB.format(python=sys.executable))
        stub.chmod(0o755)
    log = workdir.parent / "quickstart-calls.jsonl"
    script = "set -euo pipefail\n" + "\n".join(found[step].body for step in steps)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAIMSCHED_", "KUBE"))}
    env.update(PATH=f"{stubs}:{env.get('PATH', '/usr/bin:/bin')}", QUICKSTART_LOG=str(log))
    done = subprocess.run(["bash", "-c", script], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"the quick start's shell steps failed:\n{done.stderr}"
    if not log.exists():
        return []
    return [Call(d["argv"], Path(d["cwd"]), d["env"], d["stdin"])
            for d in map(json.loads, log.read_text().splitlines())]
