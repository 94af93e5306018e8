"""Several operator replicas with kopf peering: one acts, the standby takes over when it dies."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
import pytest
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import Store
from claimsched_operator.settings import PRIORITY_RANGE, OperatorSettings, derived_priority
from conftest import (
    Operator,
    assert_permissions_cover_the_operator,
    claimschedule,
    create,
    events,
    patch,
    runs,
    status,
)

TRIGGER = "claimsched.io/trigger"
PEERING = {"CLAIMSCHED_OPERATOR_PEERING": "claimsched",
           "CLAIMSCHED_OPERATOR_PEERING_LIFETIME_SECONDS": "3"}
RESUMED = "Resuming operations after the pause"


def synced(api: kubernetes.client.CustomObjectsApi, name: str, trigger: str) -> bool:
    s = status(api, name)
    return s.get("lastTrigger") == trigger and any(
        c["type"] == "Synced" and c["status"] == "True" for c in s.get("conditions") or ())


def test_peered_operators_act_once_and_the_standby_takes_over(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        spawn: Callable[..., Operator], store: Store) -> None:
    active = spawn("active", CLAIMSCHED_OPERATOR_PRIORITY="200", **PEERING)
    wait_for(lambda: RESUMED in active.log(), "the first replica to work", log=active.log)
    standby = spawn("standby", CLAIMSCHED_OPERATOR_PRIORITY="100", **PEERING)
    peering = wait_for(lambda: (p := served.emulator.live_object(
        "kopf.dev/v1/clusterkopfpeerings", None, "claimsched")) and len(p.get("status") or {})
        == 2 and p, "both replicas in the peering object", log=standby.log)
    assert sorted(peer["priority"] for peer in peering["status"].values()) == [100, 200]

    for name in ("first", "second"):
        doc = claimschedule(name, "@daily")
        doc["metadata"]["annotations"] = {TRIGGER: "one"}
        create(api, doc)
    for name in ("first", "second"):
        wait_for(lambda n=name: synced(api, n, "one"), f"{name} synced and triggered",
                 log=active.log)
        assert runs(store, name, "manual") == 1
        assert len(events(served, "Synced", name)) == 1
    assert "job first synced" in active.log() and "job first synced" not in standby.log()
    assert RESUMED not in standby.log()

    # The active replica dies; the standby resumes once its peering record expires (3 s).
    active.kill()
    patch(api, "first", {"metadata": {"annotations": {TRIGGER: "two"}}})
    create(api, claimschedule("third", "@daily"))
    wait_for(lambda: synced(api, "first", "two"), "the standby to handle the new trigger",
             timeout=30, log=standby.log)
    wait_for(lambda: events(served, "Synced", "third"), "third synced", log=standby.log)
    assert RESUMED in standby.log() and "job third synced" in standby.log()
    assert (runs(store, "first", "manual"), runs(store, "second", "manual")) == (2, 1)
    assert [len(events(served, "Synced", n)) for n in ("first", "second", "third")] == [1, 1, 1]
    peers = served.emulator.live_object("kopf.dev/v1/clusterkopfpeerings", None, "claimsched")
    assert [p["priority"] for p in (peers or {}).get("status", {}).values()] == [100]

    # Peering mode: every request of both replicas (the peering object too) is granted.
    assert_permissions_cover_the_operator(served, peering=True)


def test_default_priorities_differ_between_pods_and_an_explicit_one_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # kopf pauses every replica that sees another with the same priority: the priority each
    # pod derives from its name must differ between the pods of one Deployment/StatefulSet.
    pods = [f"claimsched-operator-7d4b9c8f5-{s}" for s in ("x2k9p", "q8w4z", "m5n7r")]
    pods += [f"claimsched-operator-{i}" for i in range(3)]
    priorities = [derived_priority(pod) for pod in pods]
    assert len(set(priorities)) == len(pods)
    assert all(0 < p < PRIORITY_RANGE for p in priorities)
    assert derived_priority(pods[0]) == priorities[0]  # stable across restarts
    assert derived_priority(None) == 0

    for name in ("CLAIMSCHED_OPERATOR_PRIORITY", "HOSTNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POD_NAME", pods[1])
    assert OperatorSettings().effective_priority == priorities[1]
    monkeypatch.delenv("POD_NAME")
    monkeypatch.setenv("HOSTNAME", pods[2])  # a pod's hostname is its name
    assert OperatorSettings().effective_priority == priorities[2]
    monkeypatch.setenv("CLAIMSCHED_OPERATOR_PRIORITY", "7")
    assert OperatorSettings().effective_priority == 7
