"""The chart lints strictly and every rendered object is valid, for Kubernetes 1.29 to 1.35."""

from __future__ import annotations

import re
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from tests.chart.chart import (
    CHART,
    CRD_SOURCE,
    KUBE_VERSIONS,
    MATRIX,
    NAMESPACE,
    documents,
    one,
    render,
)
from tests.helpers.crd_schema import load_crd

MONITORING = "monitoring.coreos.com/v1"
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
LINT_WARNING = 2  # helm lint severities: 1 info, 2 warning, 3 error


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("case", sorted(MATRIX))
def test_chart_lints_strictly_clean(case: str, kube: str) -> None:
    report = helm_python.lint(CHART, values=MATRIX[case], strict=True, namespace=NAMESPACE,
                              kube_version=f"v{kube}.0")
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= LINT_WARNING]
    assert problems == []


def test_lint_reports_values_the_schema_refuses() -> None:
    report = helm_python.lint(CHART, values={"replicaCount": "three"}, strict=True,
                              kube_version="v1.32.0")
    assert any("replicaCount" in error for error in report["errors"])


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_every_rendered_object_validates_strictly_on_every_kubernetes_version(case: str) -> None:
    docs = documents(MATRIX[case])
    assert docs, "nothing rendered"
    for doc in docs:
        if doc["apiVersion"] == MONITORING:
            check_monitoring_object(doc, docs)
            continue
        for kube in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, kube, strict=True)
            except kubernetes_validate.ValidationError as exc:
                raise AssertionError(
                    f"{case}: {doc['kind']} {doc['metadata']['name']} is invalid on "
                    f"Kubernetes {kube}: {exc.message} at {list(exc.path)}") from None


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_namespaced_objects_land_in_a_namespace(case: str) -> None:
    cluster_scoped = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for doc in documents(MATRIX[case]):
        has_namespace = "namespace" in doc["metadata"]
        assert has_namespace == (doc["kind"] not in cluster_scoped), doc["kind"]


def check_monitoring_object(doc: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """kubernetes_validate has no schemas for the Prometheus Operator's kinds: a minimal
    structural check of the fields the chart sets, and that they point at real objects."""
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert doc["metadata"]["namespace"] == NAMESPACE
    assert all(isinstance(v, str) for v in doc["metadata"]["labels"].values())
    if doc["kind"] == "ServiceMonitor":
        check_service_monitor(doc, docs)
    elif doc["kind"] == "PrometheusRule":
        check_prometheus_rule(doc)
    else:
        raise AssertionError(f"unexpected {doc['kind']}")


def check_service_monitor(doc: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    spec = doc["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel"}
    service = one(docs, "Service")
    selected = spec["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items(), "selects no Service"
    assert spec["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    ports = {port["name"] for port in service["spec"]["ports"]}
    assert spec["endpoints"], "no endpoints"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "honorLabels"}
        # the operator's series carry the ClaimSchedule's namespace: Prometheus must keep it
        assert endpoint["honorLabels"] is True
        assert endpoint["port"] in ports
        assert endpoint["path"] == "/metrics"
        assert DURATION.match(endpoint["interval"])
        if "scrapeTimeout" in endpoint:
            assert DURATION.match(endpoint["scrapeTimeout"])


def check_prometheus_rule(doc: dict[str, Any]) -> None:
    groups = doc["spec"]["groups"]
    assert set(doc["spec"]) == {"groups"}
    assert len({g["name"] for g in groups}) == len(groups)
    for group in groups:
        assert set(group) <= {"name", "interval", "rules"}
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "record", "expr", "for", "labels", "annotations",
                                 "keep_firing_for"}
            assert ("alert" in rule) != ("record" in rule)
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            assert rule["expr"].count("(") == rule["expr"].count(")")
            if "for" in rule:
                assert DURATION.match(rule["for"])
            for key in ("labels", "annotations"):
                assert all(isinstance(v, str) for v in rule.get(key, {}).values())


def test_prometheus_rule_alerts_on_the_operators_documented_metrics() -> None:
    docs = documents({"metrics": {"prometheusRule": {"enabled": True}}})
    rules = one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    exprs = {rule["alert"]: rule["expr"] for rule in rules}
    expected = {
        "ClaimScheduleLate": "claimsched_operator_late",
        "ClaimScheduleFailingRepeatedly": "claimsched_operator_failing",
        "ClaimScheduleMissed": "claimsched_operator_missed_runs",
        "ClaimScheduleOrphanedRuns": "claimsched_operator_orphaned_runs",
        "ClaimScheduleNoLiveAgent": "claimsched_operator_schedules_without_agents",
    }
    assert exprs.keys() == expected.keys()
    readme = (CHART / "README.md").read_text()
    for alert, metric in expected.items():
        assert re.search(rf"\b{metric}\b", exprs[alert]), alert
        assert f"`{metric}`" in readme, f"{metric} is not documented in the chart README"
        # Prometheus keeps its own template syntax: the chart must not have eaten it.
        rule = next(r for r in rules if r["alert"] == alert)
        assert "{{ $labels.namespace }}" in rule["annotations"]["description"]
        assert rule["expr"].startswith("max by (namespace, claimschedule) ("), "per schedule"
    assert "claimsched_operator_consecutive_failures" in exprs["ClaimScheduleFailingRepeatedly"]


def test_service_monitor_and_rule_are_only_rendered_when_asked_for() -> None:
    kinds = {doc["kind"] for doc in documents({})}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    kinds = {doc["kind"] for doc in documents(MATRIX["metrics-monitoring"])}
    assert {"ServiceMonitor", "PrometheusRule", "Service"} <= kinds


def test_notes_print_a_ready_to_apply_claimschedule_and_how_to_watch_it() -> None:
    for values, namespace in [({}, NAMESPACE),
                              ({"watch": {"namespaces": ["shop", "billing"]}}, "shop")]:
        notes = next(text for path, text in render(values).items() if path.endswith("NOTES.txt"))
        assert f"kubectl get claimschedules -n {namespace} -w" in notes
        body = notes.split("cat <<'YAML' | kubectl apply -f -\n", 1)[1].split("\nYAML\n", 1)[0]
        claimschedule = yaml.safe_load(body)
        assert claimschedule["kind"] == "ClaimSchedule"
        assert claimschedule["metadata"]["namespace"] == namespace
        load_crd(CRD_SOURCE).validate(claimschedule)
        assert 'agent.job("nightly-report")' in notes


def test_a_dry_run_install_renders_the_same_release() -> None:
    config = helm_python.Config(storage_driver="memory", namespace=NAMESPACE)
    try:
        release = config.install(CHART, "claimsched", MATRIX["everything"], dry_run="client",
                                 namespace=NAMESPACE)
    finally:
        config.close()
    installed = [doc for doc in yaml.safe_load_all(release["manifest"]) if doc]

    def key(doc: dict[str, Any]) -> tuple[str, str, str]:
        return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]

    assert sorted(map(key, installed)) == sorted(map(key, documents(MATRIX["everything"])))
    assert "kubectl get claimschedules" in release["notes"]
