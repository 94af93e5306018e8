"""Invalid specs, missing agents, the trigger annotation, restarts and delete, through the real
operator; every request it made must be granted by claimsched_operator.permissions."""

from __future__ import annotations

import re

import kubernetes
from tests.helpers.kube_emulator import Served

from claimsched.db import Store
from claimsched_operator import permissions
from conftest import (
    Operator,
    claimschedule,
    condition,
    create,
    delete,
    events,
    eventually,
    fetch,
    patch,
    status,
)

RESOURCE_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$")
VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def request_permission(method: str, path: str, params: dict[str, str]
                       ) -> tuple[str, str, str] | None:
    """(apiGroup, resource, verb) of a resource request; None for discovery."""
    m = RESOURCE_PATH.match(path)
    if m is None or (m["core"] is None and m["group"] is None):
        return None
    resource = m["resource"]
    if m["ns"] is None and resource == "namespaces" and m["name"] and m["sub"]:
        return None
    group = "" if m["core"] else m["group"]
    if m["sub"]:
        resource = f"{resource}/{m['sub']}"
    if method == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else "get" if m["name"] else "list"
    else:
        verb = VERBS[method]
    return group, resource, verb


def runs(store: Store, job: str, kind: str | None = None) -> int:
    with store.connection() as conn:
        row = conn.execute("SELECT count(*) FROM job_runs WHERE job_name = %s"
                           " AND (%s::text IS NULL OR kind = %s)", [job, kind, kind]).fetchone()
    return int(row[0]) if row else 0


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
    create(api, claimschedule("lonely", "@every 1s", leaseSeconds=5, heartbeatSeconds=1,
                              catchUpWindowSeconds=1))
    eventually(lambda: schedule_row(store, "lonely"), "lonely's row", log=operator.log)
    create(api, claimschedule("copycat", "@every 1s", jobName="lonely"))

    ready = {name: eventually(lambda n=name: (c := condition(api, n, "Ready"))
                              and c["status"] == "False" and c, f"Ready=False on {name}",
                              log=operator.log)
             for name in ("bad-zone", "bad-cron", "copycat")}
    assert ready["bad-zone"]["reason"] == "UnknownTimeZone"
    assert ready["bad-cron"]["reason"] == "InvalidSchedule"
    assert ready["copycat"]["reason"] == "OwnerConflict"
    assert {e["involvedObject"]["name"] for e in events(served, "Invalid")} == {
        "bad-zone", "bad-cron", "copycat"}
    assert schedule_row(store, "lonely") == ("@every 1s", True, "default/lonely")

    # Nobody handles "lonely": AgentsAvailable=False, NoLiveAgent once, missed runs counted.
    agents = eventually(lambda: (c := condition(api, "lonely", "AgentsAvailable"))
                        and c["status"] == "False" and c, "AgentsAvailable=False",
                        log=operator.log)
    assert agents["reason"] == "NoLiveAgent"
    eventually(lambda: events(served, "NoLiveAgent", "lonely"), "a NoLiveAgent Event")
    eventually(lambda: (status(api, "lonely").get("missedRuns") or {}).get("total", 0) > 0,
               "missed runs", timeout=15, log=operator.log)
    eventually(lambda: events(served, "Missed", "lonely"), "a Missed Event")

    # The trigger annotation: exactly one manual run, remembered across a restart.
    patch(api, "lonely", {"metadata": {"annotations": {"claimsched.io/trigger": "one"}}})
    eventually(lambda: status(api, "lonely").get("lastTrigger") == "one", "lastTrigger",
               log=operator.log)
    assert runs(store, "lonely", "manual") == 1
    operator.kill()
    operator.start()
    before = status(api, "lonely")["nextFireTime"]
    eventually(lambda: status(api, "lonely")["nextFireTime"] != before,
               "the status to resume after a restart", log=operator.log)
    assert runs(store, "lonely", "manual") == 1
    assert len(events(served, "NoLiveAgent", "lonely")) == 1
    assert len(events(served, "Synced", "lonely")) == 1

    # Suspend and spec changes follow into the row; delete disables it and keeps history.
    patch(api, "lonely", {"spec": {"suspend": True}})
    eventually(lambda: schedule_row(store, "lonely") == ("@every 1s", False, "default/lonely"),
               "the row to be suspended", log=operator.log)
    patch(api, "lonely", {"spec": {"suspend": False, "schedule": "@every 2s"}})
    eventually(lambda: schedule_row(store, "lonely") == ("@every 2s", True, "default/lonely"),
               "the row to follow the spec", log=operator.log)
    delete(api, "lonely")
    eventually(lambda: fetch(api, "lonely") is None, "the finalizer to let go",
               log=operator.log)
    assert schedule_row(store, "lonely") == ("@every 2s", False, None)
    assert runs(store, "lonely", "manual") == 1

    # The freed job name can now be taken by the other resource.
    patch(api, "copycat", {"metadata": {"annotations": {"example.com/nudge": "1"}}})
    eventually(lambda: schedule_row(store, "lonely") == ("@every 1s", True, "default/copycat"),
               "copycat to take over the freed job name", log=operator.log)

    granted = permissions.required(all_namespaces=True, database_refs=False, peering=False)
    missing = set()
    for x in served.emulator.exchanges:
        wanted = request_permission(x.method, x.path, x.params)
        if wanted and wanted[1] == "claimschedules" and wanted[2] in ("create", "delete"):
            continue  # this test playing kubectl; the operator never creates or deletes them
        if wanted and not permissions.covers(granted, *wanted):
            missing.add(wanted)
    assert not missing, f"requests not covered by permissions.py: {sorted(missing)}"
