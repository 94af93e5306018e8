"""A Kubernetes API for the operator tests: kmock's emulator made strict enough for real kopf.

kmock 0.8 keeps objects in memory and serves list/watch/fetch, but a real API server also
stamps metadata, answers with the right codes, honours the status subresource and finalizers,
and validates what it stores. ``KubeEmulator`` adds that, validating built-in kinds with
``kubernetes_validate`` and custom resources against their CRD (``crd_schema``, defaults
applied), so an operator that would be refused by a cluster is refused here too (422).

    with serve_emulator(tmp_path) as served:       # background thread, free port
        served.kubeconfig                            # for `kopf run` and the kubernetes client
        served.emulator.sent("POST", "/api/v1/namespaces/ns/events")  # recorded exchanges
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import re
import secrets
import threading
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import kubernetes_validate

from . import kmock_gaps
from .crd_schema import Crd, CrdValidationError, load_crd

Json = dict[str, Any]
KUBE_VERSION = "1.32"
CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "claimschedule.yaml"
_VERBS = {"create", "delete", "get", "list", "patch", "update", "watch"}
_IMMUTABLE = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
)
_SELECTOR = re.compile(
    r"^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)
kmock_gaps.parse_namespace_paths()
# Put on every bus when the emulator stops: each open watch ends, as when an API server stops.
_STOPPING: Json = {"type": "STOPPING"}


@dataclass
class Exchange:
    """One request: what a client sent, and the status it got (None while still streaming)."""

    method: str
    path: str
    params: dict[str, str]
    body: Any
    status: int | None = None


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with API-server semantics and validation; see the module docstring."""

    crds: dict[kmock.resource, Crd] = attrs.field(factory=dict, init=False)
    exchanges: list[Exchange] = attrs.field(factory=list, init=False)
    _rv: int = attrs.field(default=1, init=False)
    _answers: dict[Any, tuple[int, Json]] = attrs.field(factory=dict, init=False)
    _events: dict[kmock.resource, list[Json]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback[kmock.method.PUT] << self._serve_written
        self.fallback["get /api/"] << self._serve_api
        self.fallback["get /apis/"] << self._serve_apis
        self.resources.load_data(kmock_gaps.bundled_resources())
        for plural, kind, namespaced in [
            ("kopfpeerings", "KopfPeering", True),
            ("clusterkopfpeerings", "ClusterKopfPeering", False),
        ]:
            self.resources[f"kopf.dev/v1/{plural}"] = kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=namespaced, verbs=_VERBS
            )
        self.add_crd(load_crd(CRD_PATH))
        self._objects[kmock.resource("", "v1", "namespaces"), None, "default"] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": self._stamp({"name": "default"}),
        }

    def add_crd(self, crd: Crd) -> None:
        """Serve (discovery, CRUD) and validate the CRD's resource, like an established CRD."""
        names = crd.names
        resource = kmock.resource(crd.group, crd.version()["name"], crd.plural)
        self.crds[resource] = crd
        key = (
            kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            None,
            crd.doc["metadata"]["name"],
        )
        if self._live(key) is None:  # registered directly, not POSTed: list it like a cluster
            doc = copy.deepcopy(crd.doc)
            self._stamp(doc["metadata"])
            self._store(key, doc)
        self.resources[resource] = kmock.ResourceInfo(
            kind=crd.kind,
            singular=names.get("singular", crd.kind.lower()),
            namespaced=crd.namespaced,
            verbs=_VERBS,
            shortnames=names.get("shortNames", []),
            categories=names.get("categories", []),
            subresources=crd.version().get("subresources", {}).keys(),
        )

    def sent(
        self, method: str | None = None, path: str | re.Pattern[str] | None = None
    ) -> list[Exchange]:
        """The recorded exchanges, oldest first, filtered by method and path (or a regex)."""
        return [
            x
            for x in list(self.exchanges)
            if method in (None, x.method)
            and (
                path is None
                or (path.fullmatch(x.path) if isinstance(path, re.Pattern) else path == x.path)
            )
        ]

    async def end_watches(self) -> None:
        """End every open watch. A watch otherwise waits for its next event or its
        timeoutSeconds, even when its client is gone (a killed operator), and the server's
        shutdown waits for it."""
        for bus in list(self._buses.values()):
            await bus.put(_STOPPING)

    def live_object(self, api: str, namespace: str | None, name: str) -> Json | None:
        """A copy of a stored object (``api`` like ``claimsched.io/v1alpha1/claimschedules``)."""
        return self._live((kmock.resource(api), namespace, name))

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        text = (await raw_request.read()).decode(errors="replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        exchange = Exchange(raw_request.method, raw_request.path, dict(raw_request.query), body)
        self.exchanges.append(exchange)
        response = await super().__call__(raw_request)
        exchange.status = response.status
        return response

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        # Writes change the state first (like kmock), then users' reactions or the fallbacks
        # answer; refusals are answered here, before any reaction can pretend success.
        method, named = request.method.value, request.name is not None
        if request.resource is None or request.resource.plural is None or method == "GET":
            return await kmock.RawHandler._handle(self, request)
        try:
            if (method, named) not in {
                ("POST", False),
                ("PATCH", True),
                ("PUT", True),
                ("DELETE", True),
            }:
                raise kmock.KubernetesError(405, "MethodNotAllowed", f"{method} is not supported")
            async with self._lock:
                self._answers[request] = await self._write(request, self._info(request))
        except kmock.KubernetesError as e:
            return aiohttp.web.json_response(_status(e), status=e.status)
        return await kmock.RawHandler._handle(self, request)

    def _serve_written(self, request: kmock.Request) -> kmock.Response:
        status, body = self._answers.pop(request)
        return kmock.Response(status=status, payload=body)

    _serve_create = _serve_update = _serve_delete = _serve_written  # type: ignore[assignment]

    async def _write(self, request: kmock.Request, info: kmock.ResourceInfo) -> tuple[int, Json]:
        res = request.resource
        assert res is not None
        key = (res, request.namespace if info.namespaced else None, request.name)
        dry_run = request.params.get("dryRun") == "All"
        if request.method.value == "POST":
            new = self._new_object(request, info)
            key = (res, new["metadata"].get("namespace"), new["metadata"]["name"])
            if self._live(key) is not None:
                raise kmock.KubernetesError(409, "AlreadyExists", f"{key[2]!r} already exists")
            new = self._validate(res, new, None)
            if not dry_run:
                self._store(key, new)
                await self._publish(res, "ADDED", new)
                if res.plural == "customresourcedefinitions":
                    self.add_crd(Crd(new))
            return 201, new
        old = self._live(key)
        if old is None:
            raise kmock.KubernetesError(404, "NotFound", f"{res.plural} {request.name!r} not found")
        if request.method.value == "DELETE":
            return 200, await self._delete(key, old, dry_run)
        new = self._updated(request, info, old)
        if new == old:
            return 200, old  # a no-op keeps the resourceVersion, like the API server
        if {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in old.items() if k not in ("metadata", "status")
        }:
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        new["metadata"]["resourceVersion"] = self._next_rv()
        if not dry_run:
            gone = new["metadata"].get("deletionTimestamp") and not new["metadata"].get(
                "finalizers"
            )
            self._store(key, new, deleted=bool(gone))
            await self._publish(res, "DELETED" if gone else "MODIFIED", new)
        return 200, new

    def _new_object(self, request: kmock.Request, info: kmock.ResourceInfo) -> Json:
        new = copy.deepcopy(request.data)
        if not isinstance(new, dict):
            raise kmock.KubernetesError(400, "BadRequest", "the body must be a JSON object")
        self._check_type(request, info, new)
        meta = new.setdefault("metadata", {})
        if info.namespaced:
            if not request.namespace or meta.get("namespace", request.namespace) != (
                request.namespace
            ):
                raise kmock.KubernetesError(
                    400,
                    "BadRequest",
                    "the namespace of the object does not match the namespace of the request",
                )
            meta["namespace"] = request.namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _invalid(new, [("metadata.name", "name or generateName is required")])
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        for field in _IMMUTABLE[2:]:
            meta.pop(field, None)
        self._stamp(meta)
        if "status" in info.subresources:
            new.pop("status", None)  # the status is only written through /status
        return new

    def _updated(self, request: kmock.Request, info: kmock.ResourceInfo, old: Json) -> Json:
        data = request.data
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        expected_rv = None
        if request.method.value == "PUT":
            new = copy.deepcopy(data)
            expected_rv = (data or {}).get("metadata", {}).get("resourceVersion")
        elif ctype == "application/json-patch+json" and isinstance(data, list):
            try:
                new = jsonpatch.apply_patch(old, data)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise kmock.KubernetesError(422, "Invalid", f"JSON patch failed: {e}") from None
        elif ctype == "application/merge-patch+json" or (
            ctype == "application/strategic-merge-patch+json" and _is_builtin(request)
        ):
            new = _merge_patch(old, data)
            expected_rv = (data or {}).get("metadata", {}).get("resourceVersion")
        else:
            raise kmock.KubernetesError(415, "UnsupportedMediaType", f"unsupported {ctype!r}")
        if not isinstance(new, dict):
            raise kmock.KubernetesError(400, "BadRequest", "the result must be a JSON object")
        if expected_rv is not None and expected_rv != old["metadata"]["resourceVersion"]:
            raise kmock.KubernetesError(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version",
            )
        self._check_type(request, info, new)
        if request.subresource == "status" and "status" in info.subresources:
            new = (
                {**old, "status": new["status"]}
                if "status" in new
                else {k: v for k, v in old.items() if k != "status"}
            )
        elif request.subresource is not None:
            raise kmock.KubernetesError(404, "NotFound", f"no subresource {request.subresource}")
        elif "status" in info.subresources:
            new.pop("status", None)
            new.update({"status": old["status"]} if "status" in old else {})
        meta = new["metadata"] = dict(new.get("metadata") or {})
        for field in _IMMUTABLE:
            meta.pop(field, None)
            meta.update({field: old["metadata"][field]} if field in old["metadata"] else {})
        added = set(meta.get("finalizers", [])) - set(old["metadata"].get("finalizers", []))
        if meta.get("deletionTimestamp") and added:
            raise _invalid(
                new,
                [
                    (
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted",
                    )
                ],
            )
        return self._validate(request.resource, new, old)  # type: ignore[arg-type]

    async def _delete(self, key: Any, old: Json, dry_run: bool) -> Json:
        if old["metadata"].get("deletionTimestamp"):
            return old  # already being deleted, waiting for its finalizers
        gone = not old["metadata"].get("finalizers")
        new = copy.deepcopy(old)
        new["metadata"]["resourceVersion"] = self._next_rv()
        if not gone:
            new["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
        if not dry_run:
            self._store(key, new, deleted=gone)
            await self._publish(key[0], "DELETED" if gone else "MODIFIED", new)
        return new

    def _validate(self, res: kmock.resource, obj: Json, old: Json | None) -> Json:
        if res in self.crds:
            try:
                return self.crds[res].validate(obj, old)
            except CrdValidationError as e:
                raise _invalid(obj, e.errors) from None
        if res.group == "kopf.dev":
            return obj  # kopf's peering objects: free-form
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            raise _invalid(obj, [(".".join(map(str, e.absolute_path)), e.message)]) from None
        except kubernetes_validate.SchemaNotFoundError:
            raise _invalid(obj, [("kind", f"no schema for {obj.get('kind')}")]) from None
        return obj

    def _check_type(self, request: kmock.Request, info: kmock.ResourceInfo, obj: Json) -> None:
        res = request.resource
        assert res is not None
        api_version = f"{res.group}/{res.version}".lstrip("/")
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", info.kind)
        if (obj["apiVersion"], obj["kind"]) != (api_version, info.kind):
            raise kmock.KubernetesError(
                400,
                "BadRequest",
                f"expected {api_version} {info.kind}, got {obj['apiVersion']} {obj['kind']}",
            )

    def _info(self, request: kmock.Request) -> kmock.ResourceInfo:
        if request.resource not in self.resources:
            raise kmock.KubernetesError(
                404,
                "NotFound",
                f"the server could not find the requested resource {request.resource}",
            )
        return self.resources[request.resource]  # type: ignore[index]

    def _live(self, key: Any) -> Json | None:
        if key not in self._objects or self._objects[key].deleted:
            return None
        return copy.deepcopy(self._objects[key].raw)

    def _store(self, key: Any, obj: Json, *, deleted: bool = False) -> None:
        if key not in self._objects:
            self._objects[key] = obj
        else:
            self._objects[key].history.append(obj)
        if deleted:
            self._objects[key].delete()

    async def _publish(self, res: kmock.resource, kind: str, obj: Json) -> None:
        self._events.setdefault(res, []).append({"type": kind, "object": obj})
        await self._buses[res].put({"type": kind, "object": obj})

    def _stamp(self, meta: Json) -> Json:
        meta.update(
            uid=str(uuid.uuid4()),
            resourceVersion=self._next_rv(),
            creationTimestamp=_now(),
            generation=1,
        )
        return meta

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    async def _serve_list(self, request: kmock.Request) -> kmock.Payload:
        info = self._info(request)
        res = request.resource
        assert res is not None
        crd = self.crds.get(res)
        if crd is not None and "as=Table" in request.headers.get("Accept", ""):
            return table(crd, self._matching(request), datetime.datetime.now(datetime.UTC))
        return {
            "apiVersion": f"{res.group}/{res.version}".lstrip("/"),
            "kind": f"{info.kind}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": self._matching(request),
        }

    def _serve_watch(self, request: kmock.Request) -> kmock.Payload:  # type: ignore[override]
        return kmock.Response(
            headers={"Content-Type": "application/json"}, payload=self._watch(request)
        )

    async def _watch(self, request: kmock.Request) -> AsyncIterator[kmock.Payload]:
        yield b""  # send the headers now, even if nothing happens for a while
        assert request.resource is not None
        bus = self._buses[request.resource]
        since = request.params.get("resourceVersion", "0") or "0"
        async with self._lock:  # the backlog and the live stream must neither gap nor overlap
            mark = await bus.mark()
            initial = (
                [{"type": "ADDED", "object": obj} for obj in self._matching(request)]
                if since == "0"
                else [
                    event
                    for event in self._events.get(request.resource, [])
                    if int(event["object"]["metadata"]["resourceVersion"]) > int(since)
                    and self._matches(request, event["object"])
                ]
            )
        timeout = float(request.params.get("timeoutSeconds", 0)) or None
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        stream = bus.stream(since=mark)
        try:
            for event in initial:
                yield event
            while deadline is None or deadline > asyncio.get_running_loop().time():
                remaining = (
                    None if deadline is None else deadline - asyncio.get_running_loop().time()
                )
                try:
                    event = await asyncio.wait_for(anext(stream), remaining)
                except TimeoutError:
                    return  # the server-side timeout: the client lists and watches again
                if event is _STOPPING:
                    return
                if self._matches(request, event["object"]):
                    yield event
        finally:
            await bus.unmark(mark)

    def _matching(self, request: kmock.Request) -> list[Json]:
        return [
            obj.raw
            for (res, _, _), obj in self._objects.items()
            if res == request.resource and not obj.deleted and self._matches(request, obj.raw)
        ]

    def _matches(self, request: kmock.Request, obj: Json) -> bool:
        meta = obj.get("metadata", {})
        if request.namespace is not None and meta.get("namespace") != request.namespace:
            return False
        if request.name is not None and meta.get("name") != request.name:
            return False
        return _selected(meta.get("labels") or {}, request.params.get("labelSelector", ""))

    async def _serve_version(self, request: kmock.Request) -> kmock.Payload:
        doc = await super()._serve_version(request)
        assert isinstance(doc, dict)
        return {**doc, "groupVersion": doc["groupVersion"].lstrip("/")}


def table(crd: Crd, items: list[Json], now: datetime.datetime) -> Json:
    """A list as `kubectl get` asks for it (Accept: application/json;as=Table;v=v1;
    g=meta.k8s.io): the CRD's printer columns, cells as the API server's CRD table convertor
    renders them (a date as its age, `<invalid>` for a time more than a second ahead, as
    apimachinery's HumanDuration does), after Name."""
    columns = crd.version().get("additionalPrinterColumns", [])
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "Table",
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": "Name of the resource"},
            *({"name": c["name"], "type": c["type"], "format": c.get("format", ""),
               "priority": c.get("priority", 0), "description": c.get("description", "")}
              for c in columns),
        ],
        "rows": [{"cells": [obj["metadata"]["name"],
                            *(_cell(c, obj, now) for c in columns)],
                  "object": {"kind": "PartialObjectMetadata",
                             "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}}
                 for obj in items],
    }


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def kubectl_get(url: str, path: str) -> Json:
    """The Table `kubectl get` asks the API server for, e.g. for
    `/apis/claimsched.io/v1alpha1/namespaces/NS/claimschedules`."""
    request = urllib.request.Request(f"{url}{path}", headers={"Accept": TABLE})
    with urllib.request.urlopen(request, timeout=10) as answer:
        found: Json = json.loads(answer.read())
    return found


def printed_rows(shown: Json, *, wide: bool = False) -> list[dict[str, str]]:
    """The rows kubectl prints from a Table, header -> cell: the priority-0 columns (all with
    `-o wide`), headers upper-cased, a missing value `<none>`, a boolean lower-case."""
    columns = [(i, c["name"].upper()) for i, c in enumerate(shown["columnDefinitions"])
               if wide or not c["priority"]]
    return [{name: "<none>" if row["cells"][i] is None else
             str(row["cells"][i]).lower() if isinstance(row["cells"][i], bool) else
             str(row["cells"][i]) for i, name in columns} for row in shown["rows"]]


def _cell(column: Json, obj: Json, now: datetime.datetime) -> Any:
    value = _json_path(obj, column["jsonPath"])
    if value is None:
        return None
    if column["type"] == "date":
        return _age(now - datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    return value


def _json_path(obj: Any, path: str) -> Any:
    """The JSONPath subset printer columns use: `.a.b` and `.list[?(@.key=="value")].field`."""
    found = obj
    for step in re.findall(r'\.([A-Za-z0-9_]+)|\[\?\(@\.(\w+)=="([^"]*)"\)\]', path):
        name, key, wanted = step
        if name:
            found = found.get(name) if isinstance(found, dict) else None
        else:
            found = next((x for x in found or () if x.get(key) == wanted), None)
        if found is None:
            return None
    return found


def _age(elapsed: datetime.timedelta) -> str:
    """apimachinery's duration.HumanDuration, to the precision kubectl shows."""
    seconds = int(elapsed.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _is_builtin(request: kmock.Request) -> bool:
    return request.resource is not None and "." not in str(request.resource.group).replace(
        ".k8s.io", ""
    )


def _selected(labels: dict[str, str], selector: str) -> bool:
    for term in filter(str.strip, re.split(r",(?![^()]*\))", selector)):
        match = _SELECTOR.match(term)
        if not match:
            raise kmock.KubernetesError(400, "BadRequest", f"invalid label selector {term!r}")
        negated, key, op, value, set_op, values = match.groups()
        choices = {v.strip() for v in (values or "").split(",")}
        ok = (
            key not in labels
            if negated
            else labels.get(key) == value
            if op in ("=", "==")
            else labels.get(key) != value
            if op == "!="
            else labels.get(key) in choices
            if set_op == "in"
            else labels.get(key) not in choices
            if set_op == "notin"
            else key in labels
        )
        if not ok:
            return False
    return True


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _invalid(obj: Json, errors: list[tuple[str, str]]) -> kmock.KubernetesError:
    kind, name = obj.get("kind", "Object"), obj.get("metadata", {}).get("name", "")
    causes = [
        {"reason": "FieldValueInvalid", "field": path, "message": message}
        for path, message in errors
    ]
    text = "; ".join(f"{path}: {message}" if path else message for path, message in errors)
    return kmock.KubernetesError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {text}',
        {"name": name, "kind": kind, "causes": causes},
    )


def _status(e: kmock.KubernetesError) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "code": e.status,
        "reason": e.reason,
        "message": e.message,
        "details": e.details or {},
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Served:
    """A running emulator: its object, base URL and a kubeconfig file pointing at it."""

    emulator: KubeEmulator
    url: str
    kubeconfig: Path


@contextlib.contextmanager
def serve_emulator(directory: Path) -> Iterator[Served]:
    """Serve a fresh KubeEmulator on 127.0.0.1 (a free port) from a background thread.

    Writes ``directory/kubeconfig`` (plain HTTP, a dummy token) for ``kopf run`` (KUBECONFIG)
    and ``kubernetes.config.new_client_from_config``.
    """
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        try:
            async with KubeEmulator() as emulator, kmock.Server(emulator) as server:
                box.update(
                    emulator=emulator, port=server.port, stop=stop, loop=asyncio.get_running_loop()
                )
                started.set()
                await stop.wait()
        except BaseException as e:  # handed over to the caller's thread
            box["error"] = e
        finally:
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="kube-emulator")
    thread.start()
    started.wait(30)
    if "port" not in box:
        thread.join(30)
        raise RuntimeError("the Kubernetes emulator did not start") from box.get("error")
    url = f"http://127.0.0.1:{box['port']}"
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "emulator",
                "clusters": [{"name": "emulator", "cluster": {"server": url}}],
                "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
                "contexts": [
                    {
                        "name": "emulator",
                        "context": {
                            "cluster": "emulator",
                            "user": "emulator",
                            "namespace": "default",
                        },
                    }
                ],
            }
        )
    )
    try:
        yield Served(box["emulator"], url, kubeconfig)
    finally:
        asyncio.run_coroutine_threadsafe(box["emulator"].end_watches(), box["loop"]).result(10)
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)
