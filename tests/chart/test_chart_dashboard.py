"""The chart's Grafana dashboard: a ConfigMap only when asked for, a valid dashboard, and every
metric its queries use is one the agent or the operator exports."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import claimsched.metrics as agent_metrics
from claimsched_operator.metrics import REGISTRY
from tests.chart.chart import CHART, MATRIX, documents, of_kind

DASHBOARD = CHART / "files" / "dashboards" / "claimsched.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
# Words of PromQL that are not metric names: aggregations, functions' keywords, operators.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}


def exported() -> set[str]:
    """Every series name the agent and the operator expose, with Prometheus' suffixes."""
    kinds: list[tuple[str, str]] = []
    for value in vars(agent_metrics).values():
        if isinstance(value, agent_metrics.Counter):
            kinds.append((value.name, "counter"))
        elif isinstance(value, agent_metrics.Histogram):
            kinds.append((value.name, "histogram"))
    kinds += [(family.name, family.type) for family in REGISTRY.collect()]
    return {name + suffix for name, kind in kinds for suffix in SUFFIXES[kind]}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions
    (followed by `(`), label names (inside `{...}` or a `by (...)` list), durations, variables
    or keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or match.group().lower() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in board["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def test_the_dashboard_configmap_is_only_rendered_when_asked_for() -> None:
    assert not [d for d in of_kind(documents({}), "ConfigMap")
                if d["metadata"]["labels"].get("grafana_dashboard")]
    docs = documents(MATRIX["metrics-monitoring"])
    (config_map,) = [d for d in of_kind(docs, "ConfigMap")
                     if d["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "claimsched"}
    assert json.loads(config_map["data"]["claimsched.json"]) == dashboard(), \
        "the ConfigMap carries the file as it is"
    other = documents({"metrics": {"grafanaDashboard": {"enabled": True,
                                                        "namespace": "monitoring"}}})
    assert [d["metadata"]["namespace"] for d in of_kind(other, "ConfigMap")] == ["monitoring"]


def test_the_dashboard_is_a_valid_grafana_dashboard() -> None:
    board = dashboard()
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 30
    assert board["title"] and board["uid"]
    ids = [panel["id"] for panel in panels(board)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    queries = [p for p in panels(board) if p["type"] != "row"]
    assert len(queries) >= 8
    for panel in queries:
        assert panel["title"] and set(panel["gridPos"]) == {"x", "y", "w", "h"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"], f"{panel['title']} has no targets"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "claimschedule"} <= variables.keys()
    exprs = [t["expr"] for p in queries for t in p["targets"]]
    assert any('namespace=~"$namespace"' in e and 'claimschedule=~"$claimschedule"' in e
               for e in exprs), "the per-schedule panels follow the variables"


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    board = dashboard()
    names = exported()
    used: set[str] = set()
    for panel in panels(board):
        for target in panel.get("targets", []):
            used |= metric_names(target["expr"])
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            used |= metric_names(re.sub(r"label_values\((.*),\s*\w+\)$", r"\1",
                                        variable["query"]["query"]))
    assert used, "no metric found in the queries"
    assert used <= names, f"not exported by the agent or the operator: {sorted(used - names)}"
    for wanted in ("claimsched_operator_last_success_timestamp_seconds",
                   "claimsched_runs_total", "claimsched_fire_to_start_seconds_bucket",
                   "claimsched_run_duration_seconds_bucket", "claimsched_orphans_reaped_total",
                   "claimsched_completions_refused_total", "claimsched_operator_missed_runs",
                   "claimsched_operator_schedules_without_agents"):
        assert wanted in used, f"the dashboard does not show {wanted}"


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (job) (rate(a_total{job=~"$job", x="y{z}"}[$__rate_interval]))', {"a_total"}),
    ("time() - max by (namespace) (b_seconds) / on (namespace) group_left c", {"b_seconds", "c"}),
    ("histogram_quantile(0.5, sum by (le) (rate(d_bucket[5m])))", {"d_bucket"}),
])
def test_metric_names_are_read_out_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names
