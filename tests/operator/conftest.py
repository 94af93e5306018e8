"""Fixtures for the operator's tests: the emulator, a client playing kubectl, and the real
`claimsched-operator` console script as a subprocess (killed in teardown).

The client playing kubectl sends its own bearer token, so the emulator's record of requests
(kmock keeps every request with its headers) tells the operator's requests from the test's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kmock
import kubernetes
import pytest
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families
from tests.helpers.kube_emulator import Served, serve_emulator
from tests.helpers.polling import http_ok, wait_for

from claimsched.db import Store
from claimsched.tools.postgres import free_port
from claimsched_operator import permissions

GROUP, VERSION, PLURAL, NS = "claimsched.io", "v1alpha1", "claimschedules", "default"
OPERATOR = Path(sys.executable).parent / "claimsched-operator"
KUBECTL_TOKEN = "kubectl-in-the-tests"  # the operator uses the kubeconfig's token


@dataclass
class Operator:
    """The real operator process; start/kill/restart it, read its log."""

    served: Served
    dsn: str
    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    health_port: int = 0
    serve_metrics: bool = False
    metrics_port: int = 0

    def start(self) -> Operator:
        self.starts += 1
        self.health_port = free_port()
        self.metrics_port = free_port() if self.serve_metrics else 0
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KUBERNETES_", "CLAIMSCHED_"))}
        env.update({
            "KUBECONFIG": str(self.served.kubeconfig),
            "CLAIMSCHED_DSN": self.dsn,
            "CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS": "0.5",
            "CLAIMSCHED_OPERATOR_HEALTH_PORT": str(self.health_port),
            "CLAIMSCHED_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "POD_NAME": "claimsched-operator-0",
            **self.env,
        })
        log = self.folder / f"operator-{self.starts}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(OPERATOR), "--verbose"], stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=self.folder)
        wait_for(self._healthy, "the operator's /healthz", log=self.log)
        return self

    def _healthy(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, f"operator exited:\n{self.log()[-4000:]}"
        return http_ok(f"http://127.0.0.1:{self.health_port}/healthz")

    def get(self, path: str) -> int:
        """The HTTP status of GET `path` on the health port."""
        try:
            url = f"http://127.0.0.1:{self.health_port}{path}"
            with urllib.request.urlopen(url, timeout=8) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """The samples of /metrics: (name, labels) -> value."""
        assert self.metrics_port, "set serve_metrics before starting"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        return {(sample.name, frozenset(sample.labels.items())): sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples}

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace")
                         for p in sorted(self.folder.glob("operator-*.log")))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_emulator(tmp_path) as served:
        yield served


@pytest.fixture
def client(served: Served) -> Iterator[kubernetes.client.ApiClient]:
    api_client = kubernetes.config.new_client_from_config(config_file=str(served.kubeconfig))
    api_client.configuration.refresh_api_key_hook = None  # it would reload the kubeconfig's
    api_client.configuration.api_key = {"BearerToken": f"Bearer {KUBECTL_TOKEN}"}
    api_client.user_agent = "kubectl (claimsched tests)"
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def api(client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(client)


@pytest.fixture
def core(client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(client)


@pytest.fixture
def spawn(served: Served, dsn: str, tmp_path: Path) -> Iterator[Callable[..., Operator]]:
    """Start more operator processes: spawn(name, **env), each with its own folder and log."""
    started: list[Operator] = []

    def start(name: str, serve_metrics: bool = False, **env: str) -> Operator:
        folder = tmp_path / name
        folder.mkdir()
        op = Operator(served, dsn, folder, dict(env), serve_metrics=serve_metrics)
        started.append(op)
        return op.start()

    try:
        yield start
    except BaseException:
        for op in started:
            print(f"--- operator in {op.folder.name} ---\n{op.log()[-6000:]}")
        raise
    finally:
        for op in started:
            op.kill()


@pytest.fixture
def operator(served: Served, dsn: str, tmp_path: Path) -> Iterator[Operator]:
    """Not started: call .start() (after setting .env) in the test."""
    op = Operator(served, dsn, tmp_path)
    try:
        yield op
    except BaseException:
        print(op.log()[-8000:])
        raise
    finally:
        op.kill()


def runs(store: Store, job: str, kind: str | None = None) -> int:
    """How many runs of `job` (of one kind: scheduled, manual, backfill) the database holds."""
    with store.connection() as conn:
        row = conn.execute("SELECT count(*) FROM job_runs WHERE job_name = %s"
                           " AND (%s::text IS NULL OR kind = %s)", [job, kind, kind]).fetchone()
    return int(row[0]) if row else 0


def claimschedule(name: str, schedule: str = "@every 1s", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClaimSchedule",
            "metadata": {"name": name}, "spec": {"schedule": schedule, **spec}}


def create(api: kubernetes.client.CustomObjectsApi, doc: dict[str, Any],
           namespace: str = NS) -> dict[str, Any]:
    return dict(api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, doc))


def patch(api: kubernetes.client.CustomObjectsApi, name: str, body: dict[str, Any],
          namespace: str = NS) -> dict[str, Any]:
    return dict(api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, body))


def delete(api: kubernetes.client.CustomObjectsApi, name: str, namespace: str = NS) -> None:
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def fetch(api: kubernetes.client.CustomObjectsApi, name: str,
          namespace: str = NS) -> dict[str, Any] | None:
    try:
        return dict(api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def status(api: kubernetes.client.CustomObjectsApi, name: str) -> dict[str, Any]:
    obj = fetch(api, name)
    return dict((obj or {}).get("status") or {})


def condition(api: kubernetes.client.CustomObjectsApi, name: str, type_: str
              ) -> dict[str, Any] | None:
    for c in status(api, name).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


def events(served: Served, reason: str | None = None, name: str | None = None
           ) -> list[dict[str, Any]]:
    """Events the operator posted (successfully), oldest first."""
    found = []
    for x in served.emulator.sent("POST"):
        if not x.path.endswith("/events") or x.status not in (200, 201):
            continue
        body = x.body if isinstance(x.body, dict) else {}
        if reason and body.get("reason") != reason:
            continue
        if name and (body.get("involvedObject") or {}).get("name") != name:
            continue
        found.append(body)
    return found


# -- who asked for what ------------------------------------------------------------------------

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


def requests_by(served: Served, operator: bool = True) -> list[kmock.Request]:
    """The requests the emulator received from the operator(s), or from the test's client."""
    mine = f"Bearer {KUBECTL_TOKEN}"
    return [r for r in list(served.emulator)
            if (_authorization(r) != mine) is operator]


def _authorization(request: kmock.Request) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == "authorization"), None)


def operator_permissions(served: Served) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of every resource request the operator(s) made."""
    found = set()
    for r in requests_by(served):
        wanted = request_permission(str(r.method.value), r.url.path, dict(r.params))
        if wanted:
            found.add(wanted)
    return found


def assert_permissions_cover_the_operator(served: Served, *, database_refs: bool = False,
                                          peering: bool = False) -> None:
    """Every request the operator made is granted by claimsched_operator.permissions."""
    assert requests_by(served, operator=False), "the test's own requests were not told apart"
    granted = permissions.required(all_namespaces=True, database_refs=database_refs,
                                   peering=peering)
    used = operator_permissions(served)
    missing = {p for p in used if not permissions.covers(granted, *p)}
    assert not missing, f"requests not covered by permissions.py: {sorted(missing)}"


def sample(metrics: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
           **labels: str) -> float | None:
    return metrics.get((name, frozenset(labels.items())))
