"""Our Dockerfiles, read and replayed without a container engine (none runs here).

`replay()` runs a Dockerfile's build steps on this machine, so a Dockerfile that drifts from the
package (a missing file in the context, a wrong extra, a name fetched from an index) fails a
test. All stages share one root directory standing in for the image's `/`: the paths an image
owns (`IMAGE_PATHS`) are rewritten into it; `python` is this interpreter (the base image's
Python); RUN steps that only create the image's user are skipped (they would change the host).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Absolute paths our images create; anything else absolute in a step is refused by the replay.
IMAGE_PATHS = ("/src", "/dist", "/opt", "/app")
#: Absolute paths a step may name without the replay owning them.
SYSTEM_PATHS = ("/tmp", "/nonexistent", "/usr/sbin/nologin")
USER_COMMANDS = ("groupadd", "useradd")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    logical, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "dangling line continuation"
    out = []
    for entry in logical:
        keyword, _, arguments = entry.strip().partition(" ")
        out.append((keyword.upper(), arguments.strip()))
    return out


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":
            result.append([])
        result[-1].append((keyword, arguments))
    return result


def ignored(path: str, rules: list[str]) -> bool:
    """Whether .dockerignore `rules` keep `path` (relative, with /) out of the context."""
    verdict = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatchcase(p, pattern[3:]) for p in parts)
        else:
            hit = any(fnmatch.fnmatchcase(p, pattern) for p in prefixes)
        if hit:
            verdict = not negate
    return verdict


def context(repo: Path, files: list[str]) -> list[str]:
    """The files of `files` (relative to `repo`) that the root .dockerignore lets in."""
    rules = [
        line.strip()
        for line in (repo / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    return [name for name in files if not ignored(name, rules)]


@dataclass
class Replay:
    """The state of a replay: the stand-in root, the environment and the working directory."""

    root: Path
    env: dict[str, str]
    workdir: str = "/"
    cmd: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def host(self, path: str) -> Path:
        """The host path standing in for the image's absolute `path`."""
        return self.root / path.lstrip("/")

    def rewrite(self, text: str) -> str:
        """Image-owned absolute paths in `text` moved under the root; others refused."""
        for match in re.finditer(r"(?<![\w$./-])/[\w./*-]+", text):
            path = match.group(0)
            known = path.startswith(IMAGE_PATHS) or path.startswith(SYSTEM_PATHS)
            assert known, f"the replay does not know the image path {path!r}"
        pattern = "|".join(re.escape(p) for p in IMAGE_PATHS)
        return re.sub(
            rf"(?<![\w$./-])({pattern})(?=[/\s\"':]|$)", lambda m: str(self.root) + m.group(1), text
        )


def _python_shim(folder: Path) -> Path:
    """A `python` on PATH that is this interpreter, as the base image's `python` would be."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    return folder


def _set_env(state: Replay, arguments: str) -> None:
    for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', arguments):
        value = state.rewrite(value.strip('"'))
        state.env[name] = value.replace("$PATH", state.env.get("PATH", ""))


def replay(
    dockerfile: Path, repo: Path, files: list[str], root: Path, base_env: dict[str, str]
) -> Replay:
    """Run the build steps of `dockerfile` with `repo`'s files (as the build context)."""
    shims = _python_shim(root.parent / f"{root.name}-shims")
    env = {**base_env, "PATH": f"{shims}{os.pathsep}{base_env.get('PATH', '')}"}
    state = Replay(root=root, env=env)
    root.mkdir(parents=True, exist_ok=True)
    let_in = context(repo, files)
    for keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":  # every stage shares the root; a new stage starts afresh at /
            state.workdir = "/"
        elif keyword == "ENV":
            _set_env(state, arguments)
        elif keyword == "WORKDIR":
            state.workdir = arguments
            state.host(arguments).mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            _copy(state, arguments, repo, let_in)
        elif keyword == "RUN":
            _run(state, arguments)
        elif keyword in {"CMD", "ENTRYPOINT"}:
            state.cmd = json.loads(arguments)
    return state


def _copy(state: Replay, arguments: str, repo: Path, let_in: list[str]) -> None:
    words = arguments.split()
    if words[0].startswith("--from="):
        source, target = words[1:]
        assert source == target, "the replay shares one root: COPY --from must keep the path"
        assert state.host(source).exists(), f"{source} was not built in an earlier stage"
        return
    (source, target) = words
    base = target if target.startswith("/") else f"{state.workdir.rstrip('/')}/{target}"
    if source == ".":
        for name in let_in:
            destination = state.host(base) / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, destination)
        return
    assert source in let_in, f"COPY {source}: not in the build context (.dockerignore)"
    destination = state.host(base)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(repo / source, destination)


def _run(state: Replay, arguments: str) -> None:
    commands = [c.strip() for c in arguments.split("&&")]
    if all(c.startswith(USER_COMMANDS) for c in commands):
        state.log.append(f"skipped (user management): {arguments[:60]}")
        return
    assert not any(c.startswith(USER_COMMANDS) for c in commands), (
        "keep user management in its own RUN: the replay skips it"
    )
    script = state.rewrite(arguments)
    result = subprocess.run(
        ["/bin/sh", "-ec", script],
        cwd=state.host(state.workdir),
        env=state.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    state.log.append(f"RUN {script}\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    assert result.returncode == 0, f"RUN failed: {script}\n{result.stderr[-4000:]}"
