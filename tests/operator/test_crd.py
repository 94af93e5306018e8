"""The ClaimSchedule CRD is valid and structural, and accepts and refuses the right specs."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: tests.helpers
from tests.helpers.crd_schema import Crd, CrdValidationError, load_crd

ROOT = Path(__file__).resolve().parents[2]

CRD_PATH = ROOT / "crds" / "claimschedule.yaml"
EXAMPLES = sorted((ROOT / "examples" / "claimschedules").glob("*.yaml"))
DEFAULTS = {"timeZone": "UTC", "suspend": False, "concurrencyPolicy": "Forbid",
            "catchUpWindowSeconds": 3600, "catchUpPolicy": "Latest", "leaseSeconds": 120,
            "heartbeatSeconds": 30, "maxAttempts": 3, "retryOnFailure": False,
            "failureThreshold": 3, "recoveryThreshold": 1}


@pytest.fixture(scope="module")
def crd() -> Crd:
    return load_crd(CRD_PATH)


def claimschedule(spec: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"apiVersion": "claimsched.io/v1alpha1", "kind": "ClaimSchedule",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"schedule": "@every 10s"} if spec is None else spec, **top}


def refusal(crd: Crd, obj: dict[str, Any], old: dict[str, Any] | None = None
            ) -> list[tuple[str, str]]:
    with pytest.raises(CrdValidationError) as info:
        crd.validate(obj, old)
    return info.value.errors


@pytest.mark.parametrize("version", ["1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35"])
def test_crd_is_a_valid_customresourcedefinition(version: str) -> None:
    doc = yaml.safe_load(CRD_PATH.read_text())
    kubernetes_validate.validate(doc, version, strict=True)


def test_crd_schema_is_structural(crd: Crd) -> None:
    assert crd.structural_errors() == []


def test_structural_check_catches_what_apiextensions_refuses() -> None:
    doc = yaml.safe_load(CRD_PATH.read_text())
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["loose"] = {"type": "object"}
    spec["properties"]["untyped"] = {"description": "no type"}
    spec["properties"]["leaseSeconds"]["default"] = 0
    spec["additionalProperties"] = False
    errors = "\n".join(Crd(doc).structural_errors())
    assert ".spec.loose: an object needs properties" in errors
    assert ".spec.untyped: type must not be empty" in errors
    assert ".spec.leaseSeconds: the default is invalid: 0 is less than the minimum of 1" in errors
    assert ".spec: additionalProperties cannot be false" in errors


def test_every_field_is_described(crd: Crd) -> None:
    def undescribed(node: dict[str, Any], path: str) -> list[str]:
        missing = [] if node.get("description") or path == ".metadata" else [path]
        for name, sub in node.get("properties", {}).items():
            missing += undescribed(sub, f"{path}.{name}")
        if "items" in node:
            missing += undescribed(node["items"], f"{path}[]")
        return missing

    assert undescribed(crd.schema(), "") == []


def test_names_short_name_category_and_status_subresource(crd: Crd) -> None:
    assert crd.group == "claimsched.io" and crd.namespaced
    assert crd.names["kind"] == "ClaimSchedule" and crd.plural == "claimschedules"
    assert crd.names["shortNames"] == ["csched"]
    assert "claimsched" in crd.names["categories"]
    assert crd.version("v1alpha1")["subresources"] == {"status": {}}
    conditions = crd.schema()["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_printer_columns_read_the_status(crd: Crd) -> None:
    """Ready and Status first (as CloudNativePG and cert-manager show them); no date column
    holds a future time (kubectl prints `<invalid>` for a negative age)."""
    columns = {c["name"]: c for c in crd.version()["additionalPrinterColumns"]}
    default = [name for name, c in columns.items() if not c.get("priority")]
    assert default == ["Ready", "Status", "Schedule", "Suspend", "Last Run", "Last Status",
                       "Orphans", "Agents", "Age"]
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Status"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert columns["Last Run"]["jsonPath"] == ".status.lastRun.fireTime"
    assert columns["Last Status"]["jsonPath"] == ".status.lastRun.status"
    assert columns["Orphans"]["jsonPath"] == ".status.orphanedRuns.last24h"
    assert columns["Agents"]["jsonPath"] == ".status.liveAgents"
    dates = {name for name, c in columns.items() if c["type"] == "date"}
    assert dates == {"Last Run", "Age"}  # past times only
    assert columns["Next"]["type"] == "string" and columns["Next"]["priority"] == 1
    wide = {name for name, c in columns.items() if c.get("priority") == 1}
    assert wide == {"Next", "Suspend Until", "Suspend Reason", "Resolved", "TimeZone", "Missed",
                    "Failed", "Failing", "Late", "Durability"}
    assert columns["Failing"]["jsonPath"] == ".status.failing"
    assert columns["Late"]["jsonPath"] == ".status.late"
    assert columns["Durability"]["jsonPath"] == ".status.durability"


def test_defaults_are_applied_where_the_parent_exists(crd: Crd) -> None:
    obj = crd.validate(claimschedule({"schedule": "@daily", "databaseRef": {"name": "db"}}))
    assert obj["spec"] == {"schedule": "@daily", "databaseRef": {"name": "db", "key": "dsn"},
                           **DEFAULTS}
    assert "jobName" not in obj["spec"] and "status" not in obj


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_validates_against_the_crd(crd: Crd, path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    obj = crd.validate(doc)
    assert set(DEFAULTS) <= set(obj["spec"])  # defaults applied, CEL rules evaluated


def test_examples_cover_the_documented_cases(crd: Crd) -> None:
    specs = [crd.validate(yaml.safe_load(p.read_text()))["spec"] for p in EXAMPLES]
    assert len(specs) >= 5
    assert any(s["timeZone"] == "Europe/Berlin" for s in specs)
    assert any(s["schedule"] == "@every 30s" and s["concurrencyPolicy"] == "Allow" for s in specs)
    assert any(s["suspend"] for s in specs)
    assert any("databaseRef" in s for s in specs)
    assert any(s["catchUpPolicy"] == "All" for s in specs)


INVALID = {
    "missing schedule": ({"timeZone": "UTC"}, "spec", "'schedule' is a required property"),
    "empty schedule": ({"schedule": ""}, "spec.schedule", "should be non-empty"),
    "four cron fields": ({"schedule": "0 6 * *"}, "spec.schedule", "does not match"),
    "bad duration": ({"schedule": "@every 10 seconds"}, "spec.schedule", "does not match"),
    "bad enum": ({"schedule": "@daily", "concurrencyPolicy": "Sometimes"},
                 "spec.concurrencyPolicy", "is not one of ['Forbid', 'Allow', 'Replace']"),
    "bad catch-up policy": ({"schedule": "@daily", "catchUpPolicy": "Some"},
                            "spec.catchUpPolicy", "is not one of ['All', 'Latest', 'None']"),
    "heartbeat not below lease": (
        {"schedule": "@daily", "leaseSeconds": 60, "heartbeatSeconds": 30},
        "spec.heartbeatSeconds", "heartbeatSeconds must be at most a third of leaseSeconds"),
    "lease too short": ({"schedule": "@daily", "leaseSeconds": 0, "heartbeatSeconds": 1},
                        "spec.leaseSeconds", "0 is less than the minimum of 1"),
    "lease too long": ({"schedule": "@daily", "leaseSeconds": 86401},
                       "spec.leaseSeconds", "86401 is greater than the maximum of 86400"),
    "catch-up window over 31 days": ({"schedule": "@daily", "catchUpWindowSeconds": 2678401},
                                     "spec.catchUpWindowSeconds", "is greater than the maximum"),
    "zero attempts": ({"schedule": "@daily", "maxAttempts": 0}, "spec.maxAttempts",
                      "0 is less than the minimum of 1"),
    "zero max runtime": ({"schedule": "@daily", "maxRuntimeSeconds": 0},
                         "spec.maxRuntimeSeconds", "0 is less than the minimum of 1"),
    "unknown field": ({"schedule": "@daily", "leaseSecs": 60}, "spec",
                      "Additional properties are not allowed ('leaseSecs' was unexpected)"),
    "unsafe job name": ({"schedule": "@daily", "jobName": "Daily Report"}, "spec.jobName",
                        "does not match"),
    "database ref without name": ({"schedule": "@daily", "databaseRef": {"key": "dsn"}},
                                  "spec.databaseRef", "'name' is a required property"),
    "string for a number": ({"schedule": "@daily", "maxAttempts": "3"}, "spec.maxAttempts",
                            "'3' is not of type 'integer'"),
}


@pytest.mark.parametrize("case", INVALID, ids=str)
def test_invalid_claimschedule_is_refused(crd: Crd, case: str) -> None:
    spec, path, message = INVALID[case]
    errors = refusal(crd, claimschedule(spec))
    assert any(p == path and message in m for p, m in errors), errors


def test_all_failures_are_reported_at_once(crd: Crd) -> None:
    errors = refusal(crd, claimschedule(
        {"schedule": "@daily", "leaseSeconds": 30, "heartbeatSeconds": 20, "suspend": "no"},
        extra=1))
    assert {path for path, _ in errors} == {"", "spec.suspend", "spec.heartbeatSeconds"}


def test_unknown_status_field_and_bad_status_values_are_refused(crd: Crd) -> None:
    condition = {"type": "Ready", "status": "True", "reason": "Synced", "message": "",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"}
    good = claimschedule(status={"conditions": [condition], "nextFireTimes": [],
                                 "lastRun": {"status": "done", "attempt": 1}})
    crd.validate(good)
    errors = refusal(crd, claimschedule(status={
        "conditions": [condition, {**condition, "status": "Maybe"}], "lastRun": {"status": "ok"},
        "nextFireTime": "tomorrow", "kopf": {}}))
    assert {path for path, _ in errors} == {
        "status", "status.conditions[1]", "status.conditions[1].status", "status.lastRun.status",
        "status.nextFireTime"}
    assert "Duplicate value: {'type': 'Ready'}" in dict(errors)["status.conditions[1]"]


@pytest.mark.parametrize(("old_name", "new_name"), [("a", "b"), (None, "b"), ("a", None)])
def test_job_name_cannot_change_after_creation(crd: Crd, old_name: str | None,
                                               new_name: str | None) -> None:
    def with_name(name: str | None) -> dict[str, Any]:
        return claimschedule({"schedule": "@daily", **({"jobName": name} if name else {})})

    crd.validate(with_name(new_name))  # fine on create
    errors = refusal(crd, with_name(new_name), old=with_name(old_name))
    assert errors == [("spec.jobName", "jobName is immutable: it cannot be added, changed or "
                       "removed after creation (create a new ClaimSchedule instead)")]


def test_other_spec_changes_keep_the_job_name(crd: Crd) -> None:
    old = claimschedule({"schedule": "@daily", "jobName": "a"})
    new = copy.deepcopy(old)
    new["spec"].update(schedule="@hourly", suspend=True)
    assert crd.validate(new, old=old)["spec"]["jobName"] == "a"


def test_validator_handles_the_other_structural_extensions() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": True},
        "note": {"type": "string", "nullable": True},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "limits": {"type": "object", "default": {}, "properties": {
            "cpu": {"type": "integer", "default": 1}}},
    }}}}
    doc = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Thing", "plural": "things"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": schema}}]}}
    thing = Crd(doc)
    assert thing.structural_errors() == []
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}
    ok = thing.validate({**obj, "spec": {"port": "http", "note": None, "tags": ["a"],
                                         "labels": {"a": "b"}, "free": {"any": [1]}}})
    assert ok["spec"]["limits"] == {"cpu": 1}  # a defaulted parent gets its children's defaults
    with pytest.raises(CrdValidationError) as info:
        thing.validate({**obj, "spec": {"port": 1.5, "tags": ["a", "a"], "labels": {"a": 1}}})
    assert {path for path, _ in info.value.errors} == {"spec.port", "spec.tags", "spec.labels.a"}
