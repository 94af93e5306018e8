"""operator/Dockerfile, checked statically (no Docker engine here): a pinned slim base, a
numeric non-root user that matches the chart, the `operator` extra, the console script as
entrypoint, no secrets and no `latest`."""

from __future__ import annotations

import json
import re
import tomllib

from tests.chart.chart import REPO, documents, pod_spec
from tests.helpers import dockerfile

DOCKERFILE = REPO / "operator" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
PINNED_BASE = re.compile(r"^python:3\.11\.\d+-slim-bookworm$")


def instructions() -> list[tuple[str, str]]:
    return dockerfile.instructions(DOCKERFILE)


def stages() -> list[list[tuple[str, str]]]:
    return dockerfile.stages(DOCKERFILE)


def test_every_base_image_is_a_pinned_slim_python() -> None:
    bases = [args.split()[0] for kw, args in instructions() if kw == "FROM"]
    assert bases, "no FROM"
    for base in bases:
        assert PINNED_BASE.match(base), f"{base} is not pinned as python:3.11.N-slim-bookworm"
    assert "latest" not in DOCKERFILE.read_text()
    assert not [kw for kw, _ in instructions() if kw == "ARG"], "no build-arg may swap the base"


def test_runtime_stage_runs_as_a_numeric_non_root_user() -> None:
    final = stages()[-1]
    users = [args for kw, args in final if kw == "USER"]
    assert users, "the runtime stage never switches user"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "USER must be a numeric, non-zero uid"
    assert not gid or (gid.isdigit() and int(gid) > 0)
    # Nothing runs as root after the switch, and the user stays the last word.
    position = max(i for i, (kw, _) in enumerate(final) if kw == "USER")
    assert all(kw not in {"RUN", "USER"} for kw, _ in final[position + 1:])
    # The chart runs the pod as that same uid/gid (runAsNonRoot needs a numeric USER).
    pod = pod_spec(documents({}))["securityContext"]
    assert pod["runAsUser"] == int(uid) and pod["runAsGroup"] == int(gid or uid)


def test_it_installs_the_package_with_the_operator_extra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "operator" in project["optional-dependencies"]
    runs = " ".join(args for kw, args in instructions() if kw == "RUN")
    # The wheel built from the checkout, never a name from an index (tests/install replays it).
    assert re.search(r"pip wheel --no-deps --wheel-dir /dist \.", runs)
    assert re.search(r"pip install \"\$\(echo /dist/claimsched-\*\.whl\)\[operator\]\"", runs)


def test_entrypoint_is_the_operator_console_script() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["claimsched-operator"] == "claimsched_operator.main:main"
    entrypoints = [args for kw, args in stages()[-1] if kw == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert json.loads(entrypoints[0]) == ["claimsched-operator"], "exec form, console script"
    assert not [kw for kw, _ in stages()[-1] if kw == "CMD"]


def test_the_image_carries_no_secrets() -> None:
    text = DOCKERFILE.read_text()
    for keyword, arguments in instructions():
        if keyword in {"ENV", "ARG", "LABEL"}:
            assert not re.search(r"(PASSWORD|PASSWD|TOKEN|SECRET|DSN|API_KEY|PRIVATE)",
                                 arguments, re.I), arguments
        if keyword in {"COPY", "ADD"}:
            assert not re.search(r"\.env\b|\.pem\b|\.key\b|id_rsa|kubeconfig", arguments)
            assert not arguments.startswith(("http://", "https://"))
    assert "postgresql://" not in text and "postgres://" not in text


def test_build_context_lets_in_only_the_package_sources() -> None:
    rules = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", "deny everything first"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    assert {"pyproject.toml", "agent", "operator/claimsched_operator"} <= allowed
    assert not allowed & {".venv", "tests", "bench", "examples", ".git", "charts"}
    assert DOCKERFILE.relative_to(REPO).as_posix() not in allowed
