"""The ClaimSchedule's rules have one source, `claimsched.schedule.specs`: the CRD and the
operator's models are walked against it rule by rule (the SQL CHECKs:
tests/integration/test_schedule_rules.py).

Each bound is tried at its edges on every side: what the agent accepts, the CRD and the models
accept, and what it refuses they refuse."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: tests.helpers
from tests.helpers.crd_schema import Crd, CrdValidationError, load_crd

from claimsched.errors import ClaimschedError
from claimsched.schedule import specs
from claimsched.schedule.specs import JobSpec
from claimsched_operator.models import ClaimScheduleSpec

ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = {ours: theirs for theirs, ours in specs.CRD_FIELDS.items()}
SPEC_DEFAULTS = JobSpec(job_name="x", schedule="@daily").row()


@pytest.fixture(scope="module")
def crd() -> Crd:
    return load_crd(ROOT / "crds" / "claimschedule.yaml")


def properties(crd: Crd) -> dict[str, Any]:
    return dict(crd.schema()["properties"]["spec"]["properties"])


def crd_accepts(crd: Crd, spec: dict[str, Any]) -> bool:
    doc = {"apiVersion": "claimsched.io/v1alpha1", "kind": "ClaimSchedule",
           "metadata": {"name": "job", "namespace": "default"},
           "spec": {"schedule": "@daily", **spec}}
    try:
        crd.validate(doc)
    except CrdValidationError:
        return False
    return True


def agent_accepts(**fields: Any) -> bool:
    try:
        JobSpec(job_name="job", schedule=fields.pop("schedule", "@daily"), **fields)
    except ClaimschedError:
        return False
    return True


def model_accepts(spec: dict[str, Any]) -> bool:
    try:
        ClaimScheduleSpec.model_validate({"schedule": "@daily", **spec})
    except ValidationError:
        return False
    return True


def edges(least: int, most: int | None) -> list[int]:
    return [least - 1, least, least + 1] + ([] if most is None else [most - 1, most, most + 1])


def fitting(name: str, value: int) -> dict[str, int]:
    """`name` at `value`, with a lease and heartbeat that fit each other (the bound alone tried)."""
    if name == "lease_seconds":
        return {"lease_seconds": value, "heartbeat_seconds": 1}
    if name == "heartbeat_seconds":
        return {"heartbeat_seconds": value, "lease_seconds": min(max(3 * value, 1), 86400)}
    return {name: value}


def test_the_crd_s_spec_fields_are_those_specs_knows(crd: Crd) -> None:
    assert set(properties(crd)) == set(specs.CRD_FIELDS) | specs.CRD_ONLY


@pytest.mark.parametrize("name", specs.BOUNDS)
def test_each_bound_of_a_job_setting_is_the_crd_s(crd: Crd, name: str) -> None:
    least, most = specs.BOUNDS[name]
    schema = properties(crd)[CRD_NAMES[name]]
    assert (schema["type"], schema["minimum"], schema.get("maximum")) == ("integer", least, most)
    for value in edges(least, most):
        fields = fitting(name, value)
        assert crd_accepts(crd, {CRD_NAMES[k]: v for k, v in fields.items()}) \
            == agent_accepts(**fields), (name, value)


@pytest.mark.parametrize("name", sorted(set(specs.CHOICES) & set(CRD_NAMES)))
def test_each_choice_is_the_crd_s_enum(crd: Crd, name: str) -> None:
    assert properties(crd)[CRD_NAMES[name]]["enum"] == list(specs.CHOICES[name])


@pytest.mark.parametrize("name", sorted(set(CRD_NAMES) - {"schedule"}))  # required
def test_each_default_is_the_crd_s(crd: Crd, name: str) -> None:
    assert properties(crd)[CRD_NAMES[name]].get("default") == SPEC_DEFAULTS[name]


@pytest.mark.parametrize("name", specs.ALERT_BOUNDS)
def test_each_alert_bound_is_the_crd_s_and_the_operator_s(crd: Crd, name: str) -> None:
    least, most = specs.ALERT_BOUNDS[name]
    schema = properties(crd)[name]
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("integer", least, most)
    for value in edges(least, most):
        assert crd_accepts(crd, {name: value}) == model_accepts({name: value}) \
            == (least <= value <= most), (name, value)
    default = next(f.default for f in ClaimScheduleSpec.model_fields.values() if f.alias == name)
    assert schema.get("default") == default


@pytest.mark.parametrize("lease", [*range(1, 11), 59, 60, 61, 86400])
@pytest.mark.parametrize("heartbeat", [1, 2, 3, 4, 19, 20, 21, 28800])
def test_heartbeat_against_lease_is_one_rule(crd: Crd, lease: int, heartbeat: int) -> None:
    ruled = specs.heartbeat_fits(heartbeat, lease)
    assert agent_accepts(lease_seconds=lease, heartbeat_seconds=heartbeat) == ruled
    assert crd_accepts(crd, {"leaseSeconds": lease, "heartbeatSeconds": heartbeat}) == ruled


def test_the_suspend_reason_s_length_is_one_rule(crd: Crd) -> None:
    assert properties(crd)["suspendReason"]["maxLength"] == specs.MAX_REASON
    for length in (specs.MAX_REASON, specs.MAX_REASON + 1):
        reason = "x" * length
        assert crd_accepts(crd, {"suspend": True, "suspendReason": reason}) \
            == agent_accepts(enabled=False, suspend_reason=reason)


#: A jobName the CRD takes is a Kubernetes-style name (lower case, at most 63: it defaults to
#: metadata.name and is shown in status.jobName), a subset of the agent's job names.
JOB_NAMES = ["a", "nightly", "report-2.v1", "a_b", "x" * 63, "x" * 64, "x" * 128, "x" * 129,
             "Nightly", "-a", "a-", "a b", ".a", "a.", "é"]


@pytest.mark.parametrize("name", JOB_NAMES)
def test_every_job_name_the_crd_takes_the_agent_takes(crd: Crd, name: str) -> None:
    in_crd = crd_accepts(crd, {"jobName": name})
    in_agent = bool(specs.JOB_NAME.fullmatch(name))
    assert not in_crd or in_agent
    assert in_crd == (in_agent and len(name) <= 63 and name == name.lower())


#: The CRD's schedule and timeZone patterns are a coarse shape; the operator's parse decides
#: (Ready=False, InvalidSchedule / UnknownTimeZone). What parses must pass the shape.
SCHEDULES = ["@daily", "@midnight", "@every 10s", "@every 1h30m", "30 2 * * *", "H 2 * * *",
             "H(0-29) */2 * * 1-5", "H/15 * * * *", " @hourly ", "0 0 1 1 *"]
TIME_ZONES = ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "EST5EDT"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_the_agent_parses_the_crd_takes(crd: Crd, schedule: str) -> None:
    assert agent_accepts(schedule=schedule)
    assert crd_accepts(crd, {"schedule": schedule})


@pytest.mark.parametrize("zone", TIME_ZONES)
def test_every_time_zone_the_agent_knows_the_crd_takes(crd: Crd, zone: str) -> None:
    assert agent_accepts(schedule="30 2 * * *", time_zone=zone)
    assert crd_accepts(crd, {"timeZone": zone})
