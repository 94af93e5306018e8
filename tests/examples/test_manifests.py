"""Every manifest in examples/ is valid: Kubernetes objects against the Kubernetes schemas
(kubernetes-validate, strict, 1.29 to 1.35), ClaimSchedules against the CRD's own schema."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from claimsched.schedule.specs import load_claimschedules
from tests.chart.chart import KUBE_VERSIONS
from tests.chart.test_chart_security import assert_restricted
from tests.helpers.crd_schema import load_crd

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CRD = load_crd(REPO / "crds" / "claimschedule.yaml")
MANIFESTS = sorted(p for p in EXAMPLES.rglob("*.y*ml") if p.suffix in {".yaml", ".yml"})
CLAIMSCHEDULES = sorted((EXAMPLES / "claimschedules").glob("*.yaml"))


def docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def k8s_objects() -> list[dict[str, Any]]:
    return [doc for path in sorted((EXAMPLES / "k8s").glob("*.yaml")) for doc in docs(path)]


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in k8s_objects() if doc["kind"] == kind]


def test_there_are_examples_of_each_kind() -> None:
    assert len(CLAIMSCHEDULES) >= 2
    assert {"Deployment", "Secret"} <= {doc["kind"] for doc in k8s_objects()}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_manifest_validates(path: Path) -> None:
    found = docs(path)
    assert found, f"{path} holds no objects"
    for doc in found:
        if doc["apiVersion"].startswith("claimsched.io/"):
            CRD.validate(doc)
            continue
        for kube in KUBE_VERSIONS:
            # SchemaNotFoundError is a failure too: every other kind must be a built-in one.
            kubernetes_validate.validate(doc, kube, strict=True)


@pytest.mark.parametrize("path", CLAIMSCHEDULES, ids=lambda p: p.name)
def test_every_example_claimschedule_validates_against_the_crd_and_the_agent(path: Path) -> None:
    for doc in docs(path):
        assert doc["kind"] == "ClaimSchedule"
        assert doc["metadata"]["namespace"], "examples say where they go"
        defaulted = CRD.validate(doc)
        assert defaulted["spec"]["schedule"] == doc["spec"]["schedule"]
    # the same file straight into a database with `claimsched apply` (no Kubernetes)
    assert load_claimschedules(path)


def test_worker_deployment_runs_three_replicas_with_the_dsn_from_the_secret() -> None:
    (deployment,) = by_kind("Deployment")
    (secret,) = by_kind("Secret")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["namespace"] == secret["metadata"]["namespace"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    ref = env["CLAIMSCHED_DSN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"]
    assert ref["key"] in secret.get("stringData", {}) | secret.get("data", {})
    assert "value" not in env["CLAIMSCHED_DSN"]
    assert env["CLAIMSCHED_MIGRATE"]["value"] == "false"
    assert container["command"] == ["claimsched", "agent", "app:agent"]
    assert not pod["automountServiceAccountToken"]
    assert ":latest" not in container["image"] and ":" in container["image"]


def test_worker_pods_meet_the_restricted_pod_security_profile() -> None:
    (deployment,) = by_kind("Deployment")
    assert_restricted(deployment["spec"]["template"]["spec"])
    (namespace,) = by_kind("Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_worker_disruption_budget_selects_the_worker() -> None:
    (pdb,) = by_kind("PodDisruptionBudget")
    (deployment,) = by_kind("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_app_has_a_handler_for_its_claimschedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMSCHED_DSN", "postgresql://nobody@127.0.0.1:1/none")
    spec = importlib.util.spec_from_file_location("example_shop_app", EXAMPLES / "app" / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "example_shop_app", module)
    spec.loader.exec_module(module)
    assert module.agent.handlers == ["expire-carts", "invoice-reminders"]
    (reminders,) = docs(EXAMPLES / "claimschedules" / "invoice-reminders.yaml")
    job = reminders["spec"].get("jobName", reminders["metadata"]["name"])
    assert job in module.agent.handlers
    (deployment,) = by_kind("Deployment")
    assert reminders["metadata"]["namespace"] == deployment["metadata"]["namespace"]
