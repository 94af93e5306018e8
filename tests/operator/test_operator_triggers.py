"""The trigger annotation: one manual run per value, even with two operators that are not peered
(the crash in between: test_operator_scenarios)."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
from tests.helpers.kube_emulator import Served

from claimsched.db import Store
from claimsched_operator.triggers import handled, key, recorded_value
from conftest import (
    Operator,
    claimschedule,
    condition,
    create,
    events,
    eventually,
    patch,
    status,
)

TRIGGER = "claimsched.io/trigger"


def test_a_trigger_is_keyed_by_its_resource_and_value() -> None:
    assert key("uid-1", "one") == key("uid-1", "one")
    assert len({key("uid-1", "one"), key("uid-1", "two"), key("uid-2", "one")}) == 3
    assert key("uid-1", "a\0b") != key("uid-1\0a", "b")  # no ambiguous concatenation

    assert not handled("one", None)
    assert not handled("one", "two")
    assert handled("one", "one")
    long = "x" * 300  # lastTrigger keeps 253 characters: a long value is asked for again
    assert recorded_value(long) == "x" * 253
    assert not handled(long, recorded_value(long))
    assert key("uid-1", long) != key("uid-1", long + "y")


def manual_runs(store: Store, job: str) -> int:
    with store.connection() as conn:
        row = conn.execute("SELECT count(*) FROM job_runs WHERE job_name = %s"
                           " AND kind = 'manual'", [job]).fetchone()
    return int(row[0]) if row else 0


def test_two_operators_that_are_not_peered_turn_one_trigger_into_one_run(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        spawn: Callable[..., Operator], store: Store) -> None:
    # Two standalone operators (a misconfigured rollout, or peering off) both handle every
    # resource: each sees the new value with no lastTrigger and asks for a run. The trigger's
    # key in the database makes the second request a no-op, whatever the interleaving.
    one, two = spawn("one"), spawn("two")
    names = [f"job-{i}" for i in range(6)]
    for name in names:
        create(api, claimschedule(name, "@daily"))
    for name in names:
        eventually(lambda n=name: (c := condition(api, n, "Synced")) and c["status"] == "True",
                   f"{name} synced", log=lambda: one.log() + two.log())
    for name in names:
        patch(api, name, {"metadata": {"annotations": {TRIGGER: "now"}}})
    for name in names:
        eventually(lambda n=name: status(api, n).get("lastTrigger") == "now",
                   f"{name}'s lastTrigger", log=lambda: one.log() + two.log())
    # Both operators are done with the value once each logged it (a run, or a no-op).
    for op in (one, two):
        eventually(lambda o=op: all(f"trigger 'now' of job {n}:" in o.log() for n in names),
                   "both operators to handle every trigger", log=op.log)
    assert {name: manual_runs(store, name) for name in names} == dict.fromkeys(names, 1)
    assert sorted(e["involvedObject"]["name"] for e in events(served, "Triggered")) == names
