"""The trigger annotation: one manual run per value, even with two operators that are not peered
(the crash in between: test_operator_scenarios)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import kubernetes
import pytest
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import OwnedSchedules, Store
from claimsched.errors import UnknownJob
from claimsched.schedule.specs import from_claimschedule
from claimsched_operator.triggers import TRIGGER, handled, key, recorded_value
from conftest import (
    Operator,
    claimschedule,
    condition,
    create,
    events,
    patch,
    runs,
    status,
)


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


def test_one_trigger_key_asks_for_one_run_however_many_ask_at_once(store: Store) -> None:
    owned = OwnedSchedules(store)
    assert owned.sync(from_claimschedule(claimschedule("nightly", "0 3 * * *"))).outcome \
        == "created"
    start = threading.Barrier(8)

    def ask(trigger_key: str) -> datetime | None:
        start.wait(10)
        return owned.trigger("nightly", trigger_key)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, [key("uid-1", "now")] * 8))
    new = [a for a in answers if a is not None]
    assert len(new) == 1 and new[0].microsecond  # never a whole second: a scheduled key
    assert runs(store, "nightly", "manual") == 1
    assert owned.trigger("nightly", key("uid-1", "now")) is None  # a retry, later
    assert owned.trigger("nightly", key("uid-1", "later")) is not None
    assert runs(store, "nightly", "manual") == 2
    with pytest.raises(UnknownJob):
        owned.trigger("nobody", key("uid-1", "now"))


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
        wait_for(lambda n=name: (c := condition(api, n, "Synced")) and c["status"] == "True",
                 f"{name} synced", log=lambda: one.log() + two.log())
    for name in names:
        patch(api, name, {"metadata": {"annotations": {TRIGGER: "now"}}})
    for name in names:
        wait_for(lambda n=name: status(api, n).get("lastTrigger") == "now",
                 f"{name}'s lastTrigger", log=lambda: one.log() + two.log())
    # Both operators are done with the value once each logged it (a run, or a no-op).
    for op in (one, two):
        wait_for(lambda o=op: all(f"trigger 'now' of job {n}:" in o.log() for n in names),
                 "both operators to handle every trigger", log=op.log)
    assert {name: runs(store, name, "manual") for name in names} == dict.fromkeys(names, 1)
    assert sorted(e["involvedObject"]["name"] for e in events(served, "Triggered")) == names
