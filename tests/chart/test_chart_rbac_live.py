"""The real operator works under the chart's RBAC, in every mode.

The operator (the `claimsched-operator` console script, configured with exactly the env the
chart's Deployment sets) runs against the Kubernetes emulator and a real Postgres, and the
emulator authorises every request the way the API server's RBAC would against the chart's
rendered Roles and ClusterRoles (namespaced requests by a Role in that namespace or by a
ClusterRole; cluster-scoped and all-namespace requests by a ClusterRole only), answering 403
otherwise. The operator must sync, post Events, read databaseRef Secrets and peer (creating
its peering object, as nothing else does) without ever being refused.

Serving given namespaces, the chart grants nothing cluster-wide: kopf's cluster scanning
(namespaces, CRDs) must then be off (``settings.scanning.disabled``), or kopf retries the
refused requests for about a minute before it falls back.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp.web
import kubernetes
import pytest

from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process
from tests.chart.chart import documents, env, of_kind
from tests.helpers import kube_emulator
from tests.helpers.kube_emulator import Exchange, Served, serve_emulator
from tests.helpers.polling import wait_for

OPERATOR = Path(sys.executable).parent / "claimsched-operator"
NS = "default"  # the emulator's namespace
CORE = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?"
                  r"(?:/(?P<sub>[^/]+))?/?$")
GROUPED = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?"
                     r"/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?/?$")
VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}

Request = tuple[str | None, str, str, str]  # (namespace or None, apiGroup, resource, verb)


def authorisation(method: str, path: str, params: dict[str, str]) -> Request | None:
    """What RBAC checks for one request; None for discovery (allowed to everyone)."""
    if path.startswith("/api/v1/namespaces") and path.count("/") <= 4:
        # /api/v1/namespaces[/NAME]: the cluster-scoped Namespace objects themselves
        match = re.match(r"^/api/v1/namespaces(?:/(?P<name>[^/]+))?/?$", path)
        if match:
            group, ns, resource, name, sub = "", None, "namespaces", match["name"], None
        else:
            return None
    elif (m := CORE.match(path)) is not None:
        group, ns, resource, name, sub = "", m["ns"], m["res"], m["name"], m["sub"]
    elif (m := GROUPED.match(path)) is not None:
        group, ns, resource, name, sub = m["group"], m["ns"], m["res"], m["name"], m["sub"]
    else:
        return None
    if method == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else "get" if name else "list"
    else:
        verb = VERBS[method]
    return ns, group, f"{resource}/{sub}" if sub else resource, verb


def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               for r in rules)


def authorised(docs: list[dict[str, Any]], request: Request) -> bool:
    ns, group, resource, verb = request
    cluster_rules = [rule for role in of_kind(docs, "ClusterRole") for rule in role["rules"]]
    if allowed(cluster_rules, group, resource, verb):
        return True
    if ns is None:
        return False
    rules = [rule for role in of_kind(docs, "Role") if role["metadata"]["namespace"] == ns
             for rule in role["rules"]]
    return allowed(rules, group, resource, verb)


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class RbacEmulator(kube_emulator.KubeEmulator):
    """The emulator, answering 403 to what `self.rbac` (rendered chart objects) does not grant."""

    rbac: list[dict[str, Any]] | None = None
    denied: set[Request]

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        request = authorisation(raw_request.method, raw_request.path, dict(raw_request.query))
        if self.rbac is not None and request is not None and not authorised(self.rbac, request):
            self.denied.add(request)
            self.exchanges.append(Exchange(raw_request.method, raw_request.path,
                                           dict(raw_request.query), None, 403))
            ns, group, resource, verb = request
            return aiohttp.web.json_response(status=403, data={
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                "reason": "Forbidden",
                "message": f'{resource}.{group} is forbidden: cannot {verb} in '
                           f'{ns or "the cluster scope"}'})
        return await super().__call__(raw_request)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setattr(kube_emulator, "KubeEmulator", RbacEmulator)
    with serve_emulator(tmp_path) as served:
        assert isinstance(served.emulator, RbacEmulator)
        served.emulator.denied = set()
        yield served


MODES = {
    "all-namespaces": {"watch": {"allNamespaces": True}},
    "all-namespaces-databaseRef-peering": {"watch": {"allNamespaces": True},
                                           "databaseRefs": {"enabled": True}, "replicaCount": 2},
    "given-namespaces": {"watch": {"namespaces": [NS]}},
    "given-namespaces-databaseRef-peering": {"watch": {"namespaces": [NS]},
                                             "databaseRefs": {"enabled": True},
                                             "replicaCount": 2},
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_request_of_the_real_operator_is_granted_by_the_chart(
        mode: str, served: Served, dsn: str, tmp_path: Path) -> None:
    values = MODES[mode]
    docs = documents(values)
    peering = bool(env(docs)["CLAIMSCHED_OPERATOR_PEERING"])
    clusterwide = values.get("watch", {}).get("allNamespaces", False)
    database_ref = values.get("databaseRefs", {}).get("enabled", False)

    client = kubernetes.config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        custom = kubernetes.client.CustomObjectsApi(client)
        spec: dict[str, Any] = {"schedule": "@every 1s"}
        if database_ref:
            kubernetes.client.CoreV1Api(client).create_namespaced_secret(NS, {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-db"},
                "data": {"dsn": base64.b64encode(dsn.encode()).decode()}})
            spec["databaseRef"] = {"name": "app-db"}
        custom.create_namespaced_custom_object("claimsched.io", "v1alpha1", NS, "claimschedules", {
            "apiVersion": "claimsched.io/v1alpha1", "kind": "ClaimSchedule",
            "metadata": {"name": "nightly"}, "spec": spec})
    finally:
        client.close()

    first = len(served.emulator.exchanges)  # from here on, only the operator talks to the API
    served.emulator.rbac = docs
    health = free_port()
    variables = {k: v for k, v in env(docs).items() if isinstance(v, str)}
    variables.update({
        "CLAIMSCHED_DSN": dsn,  # from the Secret in a cluster
        "CLAIMSCHED_OPERATOR_HEALTH_PORT": str(health),
        "CLAIMSCHED_OPERATOR_METRICS_PORT": str(free_port()),
        "CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS": "0.5",
        "POD_NAME": "claimsched-5d9c7b6f4-x2x7q", "POD_NAMESPACE": "claimsched-system",
        "KUBECONFIG": str(served.kubeconfig),
    })
    process_env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("KUBERNETES_", "CLAIMSCHED_", "POD_"))}
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(OPERATOR), "--verbose"], env={**process_env, **variables},
                                   stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        def live(api: str, name: str, namespace: str | None = NS) -> Any:
            assert process.poll() is None, log.read_text()[-6000:]
            refused = served.emulator.denied
            assert not refused, f"{mode}: the chart's RBAC refused {sorted(refused, key=str)}"
            return served.emulator.live_object(api, namespace, name)

        def synced() -> bool:
            obj = live("claimsched.io/v1alpha1/claimschedules", "nightly") or {}
            return any(c["type"] == "Synced" and c["status"] == "True"
                       for c in obj.get("status", {}).get("conditions", []))

        if peering:
            # Nothing else creates the peering object, and kopf pauses every replica without it.
            name = env(docs)["CLAIMSCHED_OPERATOR_PEERING"]
            api = "kopf.dev/v1/clusterkopfpeerings" if clusterwide else "kopf.dev/v1/kopfpeerings"
            where = None if clusterwide else NS
            wait_for(lambda: (live(api, name, where) or {}).get("status"),
                     f"the operator to create its peering object {name} (kopf keeps every "
                     "replica paused until it exists) and to keep alive in it", log=log)
        wait_for(synced, "the ClaimSchedule to be synced", log=log)
        wait_for(lambda: served.emulator.sent("POST", f"/api/v1/namespaces/{NS}/events"),
                 "an Event", log=log)
        time.sleep(1.5)  # a few status refreshes
        wait_for(lambda: healthy(health), "/healthz", log=log)
    finally:
        stop_process(process, 20)

    assert process.returncode == 0, log.read_text()[-6000:]
    made = {request for x in served.emulator.exchanges[first:]
            if (request := authorisation(x.method, x.path, x.params)) is not None}
    print(f"{mode}: the operator made {sorted(made, key=str)}")
    assert made, "the operator made no requests"
    assert not served.emulator.denied, f"refused {sorted(served.emulator.denied, key=str)}"
