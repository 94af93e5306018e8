"""The Kubernetes emulator behaves like an API server, for a real `kopf run` and for clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: tests.helpers
from tests.helpers.kube_emulator import Exchange, Served
from tests.helpers.polling import wait_for

from claimsched.tools.postgres import free_port

GROUP, VERSION, PLURAL, NS = "claimsched.io", "v1alpha1", "claimschedules", "default"
CR_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}"

OPERATOR = '''
import datetime

import kopf

RESOURCE = ("claimsched.io", "v1alpha1", "claimschedules")


@kopf.on.create(*RESOURCE)
def created(spec, meta, patch, body, **_):
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = spec.get("jobName", meta["name"])
    patch.status["observedGeneration"] = meta["generation"]
    patch.status["jobName"] = job
    patch.status["conditions"] = [{
        "type": "Synced", "status": "True", "reason": "Synced", "lastTransitionTime": now,
        "message": f"{job} runs {spec['schedule']} in {spec['timeZone']}",
        "observedGeneration": meta["generation"],
    }]
    kopf.info(body, reason="Synced", message=f"job {job} synced")


@kopf.on.delete(*RESOURCE)
def deleted(body, **_):
    kopf.info(body, reason="Disabled", message="schedule disabled, history kept")
'''


@pytest.fixture
def api(served: Served) -> Iterator[kubernetes.client.CustomObjectsApi]:
    client = kubernetes.config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        yield kubernetes.client.CustomObjectsApi(client)
    finally:
        client.close()


@pytest.fixture
def kopf_run(served: Served, tmp_path: Path) -> Iterator[Path]:
    """A real `kopf run` process against the emulator; yields its log file."""
    script = tmp_path / "operator.py"
    script.write_text(OPERATOR)
    log = tmp_path / "kopf.log"
    health = f"http://127.0.0.1:{free_port()}/healthz"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["KUBECONFIG"] = str(served.kubeconfig)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "-A", "--verbose",
             f"--liveness={health}", str(script)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        def healthy() -> bool:
            assert proc.poll() is None, f"kopf exited:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(health, timeout=1) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_for(healthy, "kopf's liveness endpoint")
        yield log
    finally:
        proc.kill()
        proc.wait(10)


def schedule(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClaimSchedule",
            "metadata": {"name": name}, "spec": {"schedule": "@every 10s", **spec}}


def fetch(api: kubernetes.client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        return dict(api.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def rejection(call: Callable[[], object]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status), json.loads(info.value.body)


def test_real_kopf_handles_create_and_delete_through_the_emulator(
        served: Served, api: kubernetes.client.CustomObjectsApi, kopf_run: Path) -> None:
    created = api.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, schedule("nightly", timeZone="Europe/Berlin"))
    assert created["metadata"]["generation"] == 1
    assert created["spec"]["leaseSeconds"] == 120  # defaulted by the emulator, like a server

    def synced() -> dict[str, Any] | None:
        obj = fetch(api, "nightly")
        return obj if obj and obj.get("status", {}).get("conditions") else None

    obj = wait_for(synced, "the status written by kopf", log=kopf_run)
    assert obj["status"]["jobName"] == "nightly"
    assert obj["status"]["observedGeneration"] == 1
    assert obj["status"]["conditions"][0]["message"] == "nightly runs @every 10s in Europe/Berlin"
    assert obj["metadata"]["finalizers"], "kopf adds its finalizer for the on.delete handler"

    def synced_events() -> list[Exchange]:
        posted = served.emulator.sent("POST", f"/api/v1/namespaces/{NS}/events")
        return [x for x in posted if x.body.get("reason") == "Synced" and x.status]

    events = wait_for(synced_events, "the Synced event", log=kopf_run)
    assert events[0].status == 201  # validated against the Event schema and stored
    assert events[0].body["involvedObject"]["name"] == "nightly"

    deleting = api.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "nightly")
    assert deleting["metadata"]["deletionTimestamp"]
    wait_for(lambda: fetch(api, "nightly") is None, "kopf to remove its finalizer", log=kopf_run)
    assert [x for x in served.emulator.sent("POST") if x.body.get("reason") == "Disabled"]
    refused = [x for x in served.emulator.exchanges if (x.status or 0) >= 400 and x.method != "GET"]
    assert not refused, f"the emulator refused what kopf sent: {refused}"


def test_invalid_claimschedule_is_refused_with_422_and_not_stored(
        served: Served, api: kubernetes.client.CustomObjectsApi) -> None:
    status, body = rejection(lambda: api.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, schedule("bad", leaseSeconds=60, heartbeatSeconds=30,
                                             concurrencyPolicy="Sometimes")))
    assert status == 422
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    fields = {cause["field"] for cause in body["details"]["causes"]}
    assert fields == {"spec.concurrencyPolicy", "spec.heartbeatSeconds"}
    assert "at most a third of leaseSeconds" in body["message"]
    assert fetch(api, "bad") is None
    assert served.emulator.sent("POST", CR_PATH)[-1].status == 422


def test_status_and_spec_writes_are_kept_apart_and_generation_follows_spec(
        api: kubernetes.client.CustomObjectsApi) -> None:
    created = api.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, {**schedule("s"), "status": {"activeRuns": 7}})
    assert "status" not in created  # status only through /status
    patched = api.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "s", {"spec": {"suspend": True}, "status": {"activeRuns": 1}})
    assert patched["metadata"]["generation"] == 2 and "status" not in patched
    status = api.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, PLURAL, "s", {"spec": {"suspend": False}, "status": {"activeRuns": 2}})
    assert status["spec"]["suspend"] is True and status["status"] == {"activeRuns": 2}
    assert status["metadata"]["generation"] == 2
    same = api.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "s",
                                              {"spec": {"suspend": True}})
    assert same["metadata"]["resourceVersion"] == status["metadata"]["resourceVersion"]
    code, body = rejection(lambda: api.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, PLURAL, "s", {"status": {"lastRun": {"status": "exploded"}}}))
    assert code == 422 and body["details"]["causes"][0]["field"] == "status.lastRun.status"
    code, body = rejection(lambda: api.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "s", {"spec": {"jobName": "other"}}))
    assert code == 422 and "jobName is immutable" in body["message"]


def test_json_patch_test_failure_answers_422(
        served: Served, api: kubernetes.client.CustomObjectsApi) -> None:
    api.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, schedule("j"))
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
           {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}]
    code, _ = rejection(lambda: api.patch_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, "j", ops, _content_type="application/json-patch+json"))
    assert code == 422
    assert "finalizers" not in (fetch(api, "j") or {})["metadata"]


def get_json(served: Served, path: str) -> tuple[dict[str, Any], str]:
    with urllib.request.urlopen(served.url + path, timeout=10) as response:
        return json.loads(response.read()), response.headers["Content-Type"]


def test_discovery_lists_events_and_watches_look_like_a_cluster(
        served: Served, api: kubernetes.client.CustomObjectsApi) -> None:
    core, _ = get_json(served, "/api/v1")
    assert core["groupVersion"] == "v1"
    ours, _ = get_json(served, f"/apis/{GROUP}/{VERSION}")
    resources = {r["name"]: r for r in ours["resources"]}
    assert set(resources) == {"claimschedules", "claimschedules/status"}
    assert resources["claimschedules"]["shortNames"] == ["csched"]
    assert resources["claimschedules"]["categories"] == ["claimsched"]
    peering, _ = get_json(served, "/apis/kopf.dev/v1")
    assert {r["name"] for r in peering["resources"]} == {"kopfpeerings", "clusterkopfpeerings"}
    namespaces, _ = get_json(served, "/api/v1/namespaces")
    assert [n["metadata"]["name"] for n in namespaces["items"]] == ["default"]

    for name, team in [("a", "x"), ("b", "y")]:
        api.create_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, {**schedule(name), "metadata": {
                "name": name, "labels": {"team": team}}})
    listed, _ = get_json(served, f"{CR_PATH}?labelSelector=team%20in%20(y,z)")
    assert listed["kind"] == "ClaimScheduleList" and listed["apiVersion"] == f"{GROUP}/{VERSION}"
    assert [o["metadata"]["name"] for o in listed["items"]] == ["b"]
    streamed = urllib.request.urlopen(
        f"{served.url}{CR_PATH}?watch=true&labelSelector=team%3Dx&timeoutSeconds=1", timeout=10)
    with streamed:
        assert streamed.headers["Content-Type"].startswith("application/json")
        lines = [json.loads(line) for line in streamed.read().splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "a")]

    events = kubernetes.client.CoreV1Api(api.api_client)
    event = {"metadata": {"generateName": "a-"}, "reason": "Synced", "type": "Normal",
             "involvedObject": {"kind": "ClaimSchedule", "name": "a", "namespace": NS}}
    names = {events.create_namespaced_event(NS, event).metadata.name for _ in range(2)}
    assert len(names) == 2 and all(name.startswith("a-") for name in names)
    request = urllib.request.Request(  # raw HTTP: the client itself refuses unknown fields
        f"{served.url}/api/v1/namespaces/{NS}/events", method="POST",
        data=json.dumps({**event, "why": "?"}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    with refused.value as answer:
        assert answer.code == 422 and "'why' was unexpected" in json.loads(answer.read())["message"]
