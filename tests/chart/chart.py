"""Rendering the claimsched chart with real Helm code (helm-python-sdk), for the chart tests."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "claimsched"
CRD_SOURCE = REPO / "crds" / "claimschedule.yaml"
RELEASE = "claimsched"
NAMESPACE = "claimsched-system"
# Kubernetes minor versions the chart supports (Chart.yaml kubeVersion >= 1.29).
KUBE_VERSIONS = [f"1.{minor}" for minor in range(29, 36)]

# The override matrix: every mode the issue names, alone and combined.
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "all-namespaces": {"watch": {"allNamespaces": True}},
    "given-namespaces": {"watch": {"namespaces": ["shop", "billing"]}},
    "two-replicas": {"replicaCount": 2},
    "two-replicas-given-namespaces": {"replicaCount": 2, "watch": {"namespaces": ["shop"]}},
    "peering-one-replica": {"peering": {"enabled": True, "priority": 100}},
    "metrics-monitoring": {
        "metrics": {"serviceMonitor": {"enabled": True, "scrapeTimeout": "10s",
                                       "labels": {"release": "prometheus"}},
                    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"},
                                       "alertLabels": {"team": "platform"}},
                    "grafanaDashboard": {"enabled": True,
                                         "annotations": {"grafana_folder": "claimsched"}}},
    },
    "metrics-off": {"metrics": {"enabled": False}, "podDisruptionBudget": {"enabled": False}},
    "database-refs": {"databaseRefs": {"enabled": True}},
    "database-refs-given-namespaces": {
        "databaseRefs": {"enabled": True}, "watch": {"namespaces": ["billing"]}},
    "crds-off": {"crds": {"enabled": False}, "replicaCount": 3},
    "everything": {
        "replicaCount": 3,
        "watch": {"namespaces": ["shop", "billing", "reports"]},
        "databaseRefs": {"enabled": True},
        "image": {"digest": "sha256:" + "ab" * 32},
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/owner": "platform"},
        "podLabels": {"team": "platform"},
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops",
                         "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "claimsched"}}}}]}},
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "claimsched"}}}],
        "podDisruptionBudget": {"minAvailable": 1},
        "serviceAccount": {"annotations": {"example.com/role": "operator"}},
        "metrics": {"serviceMonitor": {"enabled": True},
                    "prometheusRule": {"enabled": True, "extraRules": [
                        {"alert": "ClaimschedOperatorDown", "expr": "up{job=\"claimsched\"} == 0",
                         "for": "5m", "labels": {"severity": "critical"}}]}},
    },
}


def load() -> helm_python.Chart:
    return helm_python.Chart.load(CHART)


def render(values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE,
           name: str = RELEASE) -> dict[str, str]:
    """template path -> rendered text (NOTES.txt included), as `helm template` renders it."""
    with load() as chart:
        return chart.render(values=copy.deepcopy(values or {}), name=name, namespace=namespace)


def documents(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Every rendered Kubernetes object, in template order."""
    out = []
    for path, text in sorted(render(values, **kwargs).items()):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return out


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator container's env as name -> value (or valueFrom)."""
    container = pod_spec(docs)["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) in a nested structure."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}[{index}]")
