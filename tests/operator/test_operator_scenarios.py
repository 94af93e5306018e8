"""Invalid specs, missing agents, the trigger annotation, restarts and delete, through the real
operator; every request it made must be granted by claimsched_operator.permissions."""

from __future__ import annotations

import asyncio
import threading

import kmock
import kubernetes
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import Store
from conftest import (
    GROUP,
    NS,
    PLURAL,
    VERSION,
    Operator,
    assert_permissions_cover_the_operator,
    claimschedule,
    condition,
    create,
    delete,
    events,
    fetch,
    operator_permissions,
    patch,
    runs,
    status,
)

TRIGGER = "claimsched.io/trigger"

def schedule_row(store: Store, job: str) -> tuple[object, ...] | None:
    with store.connection() as conn:
        return conn.execute("SELECT schedule, enabled, owner FROM job_schedule"
                            " WHERE job_name = %s", [job]).fetchone()


def test_invalid_specs_missing_agents_triggers_restart_and_delete(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store) -> None:
    operator.start()
    create(api, claimschedule("bad-zone", "@daily", timeZone="Mars/Olympus"))
    create(api, claimschedule("bad-cron", "61 * * * *"))
    create(api, claimschedule("bad-hash", "H(30-10) * * * *"))
    create(api, claimschedule("hashed", "H H(1-4) * * *"))
    create(api, claimschedule("lonely", "@every 1s", leaseSeconds=5, heartbeatSeconds=1,
                              catchUpWindowSeconds=1))
    wait_for(lambda: schedule_row(store, "lonely"), "lonely's row", log=operator.log)
    create(api, claimschedule("copycat", "@every 1s", jobName="lonely"))

    ready = {name: wait_for(lambda n=name: (c := condition(api, n, "Ready"))
                            and c["status"] == "False" and c, f"Ready=False on {name}",
                            log=operator.log)
             for name in ("bad-zone", "bad-cron", "bad-hash", "copycat")}
    assert ready["bad-zone"]["reason"] == "UnknownTimeZone"
    assert ready["bad-cron"]["reason"] == "InvalidSchedule"
    assert ready["bad-hash"]["reason"] == "InvalidSchedule"
    assert "minute field 'H(30-10)'" in ready["bad-hash"]["message"]
    hashed = wait_for(lambda: status(api, "hashed").get("resolvedSchedule"),
                      "hashed's resolved schedule", log=operator.log)
    assert hashed == "2 2 * * *"
    synced = condition(api, "hashed", "Synced")
    assert synced is not None and "runs H H(1-4) * * * (= 2 2 * * *)" in synced["message"]
    assert ready["copycat"]["reason"] == "Conflict"
    assert "belongs to ClaimSchedule default/lonely" in ready["copycat"]["message"]
    # Events name what happened, and come from the operator, not from kopf.
    assert {e["involvedObject"]["name"] for e in events(served, "InvalidSchedule")} == {
        "bad-cron", "bad-hash"}
    assert [e["involvedObject"]["name"] for e in events(served, "UnknownTimeZone")] == [
        "bad-zone"]
    assert {(e["source"]["component"], e["reportingComponent"]) for e in events(served)} == {
        ("claimsched-operator", "claimsched-operator")}
    assert [e["involvedObject"]["name"] for e in events(served, "Conflict")] == ["copycat"]
    assert schedule_row(store, "lonely") == ("@every 1s", True, "default/lonely")

    # Nobody handles "lonely": AgentsAvailable=False, NoLiveAgent once, missed runs counted.
    agents = wait_for(lambda: (c := condition(api, "lonely", "AgentsAvailable"))
                      and c["status"] == "False" and c, "AgentsAvailable=False",
                      log=operator.log)
    assert agents["reason"] == "NoLiveAgent"
    wait_for(lambda: events(served, "NoLiveAgent", "lonely"), "a NoLiveAgent Event")
    wait_for(lambda: (status(api, "lonely").get("missedRuns") or {}).get("total", 0) > 0,
             "missed runs", timeout=15, log=operator.log)
    wait_for(lambda: events(served, "Missed", "lonely"), "a Missed Event")

    # The trigger annotation: exactly one manual run, remembered across a restart.
    patch(api, "lonely", {"metadata": {"annotations": {"claimsched.io/trigger": "one"}}})
    wait_for(lambda: status(api, "lonely").get("lastTrigger") == "one", "lastTrigger",
             log=operator.log)
    assert runs(store, "lonely", "manual") == 1
    operator.kill()
    operator.start()
    before = status(api, "lonely")["nextFireTime"]
    wait_for(lambda: status(api, "lonely").get("nextFireTime") not in (before, None),
             "the status to resume after a restart", log=operator.log)
    assert runs(store, "lonely", "manual") == 1
    assert len(events(served, "NoLiveAgent", "lonely")) == 1
    assert len(events(served, "Synced", "lonely")) == 1

    # Suspend and spec changes follow into the row; delete disables it and keeps history.
    patch(api, "lonely", {"spec": {"suspend": True}})
    wait_for(lambda: schedule_row(store, "lonely") == ("@every 1s", False, "default/lonely"),
             "the row to be suspended", log=operator.log)
    patch(api, "lonely", {"spec": {"suspendUntil": "2099-01-01T00:00:00Z",
                                   "suspendReason": "quarter close"}})
    wait_for(lambda: (c := condition(api, "lonely", "Ready")) and "2099" in c["message"],
             "Ready to say until when", log=operator.log)
    ready = condition(api, "lonely", "Ready")
    assert ready is not None and ready["reason"] == "Suspended"
    assert ready["message"] == ("job lonely is suspended until 2099-01-01T00:00:00Z: "
                                "quarter close")
    with store.connection() as conn:
        assert conn.execute("SELECT enabled, suspend_until::text, suspend_reason FROM "
                            "job_schedule WHERE job_name = 'lonely'").fetchone() == (
            True, "2099-01-01 00:00:00+00", "quarter close")
    wait_for(lambda: status(api, "lonely").get("nextFireTime") == "2099-01-01T00:00:01Z",
             "the next fire after the suspension", log=operator.log)
    patch(api, "lonely", {"spec": {"suspend": False, "schedule": "@every 2s",
                                   "suspendUntil": None, "suspendReason": None}})
    wait_for(lambda: schedule_row(store, "lonely") == ("@every 2s", True, "default/lonely"),
             "the row to follow the spec", log=operator.log)
    delete(api, "lonely")
    wait_for(lambda: fetch(api, "lonely") is None, "the finalizer to let go",
             log=operator.log)
    assert schedule_row(store, "lonely") == ("@every 2s", False, None)
    assert runs(store, "lonely", "manual") == 1

    # The freed job name can now be taken by the other resource.
    patch(api, "copycat", {"metadata": {"annotations": {"example.com/nudge": "1"}}})
    wait_for(lambda: schedule_row(store, "lonely") == ("@every 1s", True, "default/copycat"),
             "copycat to take over the freed job name", log=operator.log)

    # Every request the operator made is granted; the test's own kubectl calls (its own token)
    # are told apart, so create and delete count too: the operator never does either.
    assert_permissions_cover_the_operator(served)
    used = operator_permissions(served)
    assert not {p for p in used if p[1] == "claimschedules" and p[2] in ("create", "delete")}
    assert ("claimsched.io", "claimschedules/status", "patch") in used


def test_trigger_is_not_run_twice_when_the_operator_dies_before_recording_it(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store) -> None:
    operator.start()
    create(api, claimschedule("nightly", "0 3 * * *"))
    wait_for(lambda: (c := condition(api, "nightly", "Synced")) and c["status"] == "True",
             "nightly to be synced", log=operator.log)

    # Hold the answer to kopf's write after the handler (the object's annotations, then its
    # status): the manual run is in the database, lastTrigger is not written yet. The emulator
    # stores the write before any reaction answers, so only the answer is held.
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}/nightly"
    caught, release = threading.Event(), threading.Event()

    def kopf_writes_crash(request: kmock.Request) -> bool:
        return (request.method == kmock.method.PATCH and request.url.path == path
                and "last-handled-configuration" in request.text and "crash" in request.text)

    async def hold() -> None:
        caught.set()
        while not release.is_set():
            await asyncio.sleep(0.02)
        # No content: this one-shot reaction steps aside and the emulator answers as usual.

    served.emulator[kopf_writes_crash] << hold
    try:
        patch(api, "nightly", {"metadata": {"annotations": {TRIGGER: "crash"}}})
        wait_for(caught.is_set, "kopf's write after the manual run", log=operator.log)
        assert runs(store, "nightly", "manual") == 1
        operator.kill()  # dies between the run and the record of it
    finally:
        release.set()
    obj = fetch(api, "nightly")
    assert obj is not None and "lastTrigger" not in obj.get("status", {})

    operator.start()
    wait_for(lambda: status(api, "nightly").get("lastTrigger") == "crash",
             "the restarted operator to record the trigger", log=operator.log)
    assert runs(store, "nightly", "manual") == 1
    assert "trigger 'crash' of job nightly: its run was requested before" in operator.log()

    # A new value is still one new run; a value used before is recorded and runs no more.
    patch(api, "nightly", {"metadata": {"annotations": {TRIGGER: "again"}}})
    wait_for(lambda: status(api, "nightly").get("lastTrigger") == "again", "lastTrigger again",
             log=operator.log)
    assert runs(store, "nightly", "manual") == 2
    patch(api, "nightly", {"metadata": {"annotations": {TRIGGER: "crash"}}})
    wait_for(lambda: status(api, "nightly").get("lastTrigger") == "crash",
             "lastTrigger back to crash", log=operator.log)
    assert runs(store, "nightly", "manual") == 2
