"""kopf handlers: ClaimSchedule spec in, job_schedule row out; status and Events back.

Handlers return None: everything reaches the resource through `patch.status` (a returned value
would land in `status.<handler id>`, which the CRD rejects)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from claimsched.db import Store
from claimsched.db.queries import query
from claimsched.errors import (
    ClaimschedError,
    DatabaseError,
    InvalidSchedule,
    InvalidSpec,
    UnknownTimeZone,
)
from claimsched.specs import JobSpec, from_claimschedule

from . import conditions, events, metrics, peering, triggers
from .catalog import Entry
from .conditions import AGENTS_AVAILABLE, READY, SYNCED, condition
from .databases import DEFAULT, read_secret_dsn, secret_key
from .kubeapi import KubeApi, KubeApiError
from .models import ClaimScheduleSpec, rfc3339
from .runtime import Runtime
from .settings import OperatorSettings

log = logging.getLogger("claimsched.operator.handlers")

RESOURCE = ("claimsched.io", "v1alpha1", "claimschedules")
STORAGE_PREFIX = "operator.claimsched.io"
RETRY_DELAY = 5.0


class OwnerConflict(InvalidSpec):
    """Another ClaimSchedule already owns this job name."""


class DatabaseRefDisabled(InvalidSpec):
    """spec.databaseRef is disabled in this operator (CLAIMSCHED_OPERATOR_DATABASE_REFS=false):
    remove it to use the operator's default database, or ask for databaseRefs to be enabled."""

    def __init__(self) -> None:
        super().__init__(self.__doc__ or "")


def _reason(exc: Exception) -> str:
    if isinstance(exc, OwnerConflict):
        return "OwnerConflict"
    if isinstance(exc, DatabaseRefDisabled):
        return "DatabaseRefDisabled"
    if isinstance(exc, InvalidSchedule):
        return "InvalidSchedule"
    if isinstance(exc, UnknownTimeZone):
        return "UnknownTimeZone"
    return "InvalidSpec"


def sync_schedule(store: Store, spec: JobSpec) -> str:
    """Write the row: 'created', 'updated' or 'unchanged'; OwnerConflict if not ours."""
    with store.connection() as conn:
        row = conn.execute(query("operator_sync_schedule"), spec.row()).fetchone()
    assert row is not None
    owner, existed, written, created = row
    if not written and existed and owner is not None and owner != spec.owner:
        raise OwnerConflict(
            f"job {spec.job_name!r} already belongs to ClaimSchedule {owner}; "
            "set a different spec.jobName"
        )
    return "created" if created else "updated" if written else "unchanged"


def release_schedule(store: Store, job_name: str, owner: str) -> bool:
    with store.connection() as conn:
        return conn.execute(
            query("operator_release_schedule"), {"job_name": job_name, "owner": owner}
        ).rowcount > 0


def _post(body: kopf.Body, event: events.Event) -> None:
    kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


def _job_name(spec: Mapping[str, Any], name: str) -> str:
    return str(spec.get("jobName") or name)


def _path(namespace: str | None, name: str) -> str:
    group, version, plural = RESOURCE
    return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"


def register(config: OperatorSettings, registry: kopf.OperatorRegistry) -> None:
    """Register the operator's handlers, with `config`'s intervals, in `registry`."""
    kube = KubeApi()

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix=STORAGE_PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=STORAGE_PREFIX)
        settings.posting.level = logging.WARNING
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.connect_timeout = 10
        settings.networking.request_timeout = 30
        settings.execution.max_workers = 8
        settings.peering.lifetime = config.peering_lifetime_seconds
        settings.peering.stealth = True  # keep-alives are not worth a log line each
        if config.namespace_list:
            # Exact namespaces: no namespace or CRD observation, so no cluster-wide permissions.
            settings.scanning.disabled = True
        runtime = Runtime.create(config, kube)
        memo["runtime"] = runtime
        metrics.serve(config.metrics_port)
        await runtime.start()
        log.info("claimsched operator started", extra={"action": "startup"})

    @kopf.on.login(registry=registry)
    async def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """The pod's service account in a cluster, else the kubeconfig (no client library).
        The operator's own requests use the same credentials; the peering object is made
        here, before kopf's peering (which starts only once a login succeeded) looks for it."""
        info: kopf.ConnectionInfo | None = (
            kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs))
        if info is not None:
            kube.use(info)
            await peering.ensure(kube, config)
        return info

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        runtime: Runtime | None = memo.get("runtime")
        if runtime is not None:
            await runtime.stop()
        await kube.close()

    @kopf.on.resume(*RESOURCE, registry=registry)
    @kopf.on.create(*RESOURCE, registry=registry)
    @kopf.on.update(*RESOURCE, registry=registry)
    async def reconcile(
        *, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
        namespace: str | None, name: str, patch: kopf.Patch, memo: Any,
        logger: kopf.Logger, **_: Any,
    ) -> None:
        runtime: Runtime = memo["runtime"]
        owner = f"{namespace}/{name}"
        job = _job_name(spec, name)
        generation = meta.get("generation")
        on_body = status.get("conditions")
        old_conditions = runtime.catalog.conditions(owner, on_body)
        patch.status["observedGeneration"] = generation
        patch.status["jobName"] = job[:63]

        def set_conditions(*wanted: tuple[str, Any, str, str]) -> None:
            merged = runtime.catalog.merge_conditions(owner, on_body, wanted, generation)
            if merged is not None:
                patch.status["conditions"] = merged

        try:
            parsed = ClaimScheduleSpec.model_validate(dict(spec))
            job_spec = from_claimschedule(dict(body), source="operator")
        except (ValidationError, InvalidSpec, InvalidSchedule, UnknownTimeZone) as exc:
            _invalid(runtime, body, owner, job, exc, old_conditions, set_conditions)
            return
        key, dsn = DEFAULT, None
        try:
            if parsed.database_ref is not None and namespace:
                if not runtime.config.database_refs:
                    raise DatabaseRefDisabled()
                key = secret_key(namespace, parsed.database_ref)
                dsn = await read_secret_dsn(runtime.kube, namespace, parsed.database_ref)
            database = await asyncio.to_thread(runtime.databases.get, key, dsn)
            store = database.store
            outcome = await asyncio.to_thread(sync_schedule, store, job_spec)
        except InvalidSpec as exc:
            _invalid(runtime, body, owner, job, exc, old_conditions, set_conditions)
            return
        except DatabaseError as exc:
            set_conditions(
                condition(SYNCED, False, "DatabaseUnavailable", str(exc)),
                condition(READY, False, "DatabaseUnavailable", str(exc)),
            )
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
        metrics.SCHEDULES_SYNCED.labels(outcome).inc()
        runtime.catalog.put(Entry(owner, job, database.name, job_spec, job_spec.parsed))
        was_synced = conditions.status_of(old_conditions, SYNCED) == "True"
        message = (f"job {job} runs {job_spec.schedule} in {job_spec.time_zone}"
                   + (" (suspended)" if not job_spec.enabled else ""))
        agents = conditions.status_of(old_conditions, AGENTS_AVAILABLE)
        set_conditions(
            condition(SYNCED, True, "Synced", message),
            _ready(job_spec.enabled, agents != "False", job),
        )
        if outcome != "unchanged" or not was_synced:
            _post(body, events.Event(events.NORMAL, "Synced", f"{message}: row {outcome}"))
        logger.info("job %s synced: %s", job, outcome)
        await _trigger(runtime.kube, store, body, meta, status, patch, job, logger)

    @kopf.on.delete(*RESOURCE, registry=registry)
    async def delete(
        *, body: kopf.Body, spec: kopf.Spec, namespace: str | None, name: str, memo: Any,
        logger: kopf.Logger, **_: Any,
    ) -> None:
        runtime: Runtime = memo["runtime"]
        owner = f"{namespace}/{name}"
        entry = runtime.catalog.get(owner)
        runtime.catalog.drop(owner)
        if entry is None:
            return
        store = runtime.databases.existing(entry.database)
        if store is None:
            return
        try:
            released = await asyncio.to_thread(release_schedule, store, entry.job_name, owner)
        except DatabaseError as exc:
            runtime.catalog.put(entry)
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
        runtime.counter.forget(entry.job_name)
        if released:
            logger.info("job %s disabled; its history is kept", entry.job_name)

    @kopf.timer(*RESOURCE, interval=config.status_interval_seconds, registry=registry)
    def publish(
        *, body: kopf.Body, meta: kopf.Meta, status: kopf.Status, namespace: str | None, name: str,
        patch: kopf.Patch, memo: Any, **_: Any,
    ) -> None:
        runtime: Runtime = memo["runtime"]
        owner = f"{namespace}/{name}"
        entry = runtime.catalog.get(owner)
        if entry is None or entry.spec is None:
            return
        observed = runtime.catalog.observation(entry)
        if observed is None:
            return
        fresh = observed.status.dump()
        old_missed = (status.get("missedRuns") or {}).get("lastMissedTime")
        if fresh["missedRuns"]["total"] and "lastMissedTime" not in fresh["missedRuns"] \
                and old_missed:
            fresh["missedRuns"]["lastMissedTime"] = old_missed
        for field in ("nextFireTime", "nextFireTimes", "lastFireTime", "lastSuccessfulTime",
                      "lastRun", "activeRuns", "orphanedRuns", "failedRuns", "missedRuns",
                      "liveAgents"):
            if status.get(field) != fresh.get(field):
                patch.status[field] = fresh.get(field)  # None removes it
        on_body = status.get("conditions")
        old_conditions = runtime.catalog.conditions(owner, on_body)
        agents_before = conditions.status_of(old_conditions, AGENTS_AVAILABLE)
        available = observed.status.live_agents > 0
        wanted = [
            condition(AGENTS_AVAILABLE, available, "AgentsAvailable" if available else
                      "NoLiveAgent", f"{observed.status.live_agents} live agent(s) handle job "
                      f"{entry.job_name}"),
        ]
        if conditions.status_of(old_conditions, SYNCED) == "True":
            wanted.append(_ready(entry.spec.enabled, available, entry.job_name))
        merged = runtime.catalog.merge_conditions(owner, on_body, wanted, meta.get("generation"))
        if merged is not None:
            patch.status["conditions"] = merged
        found = events.transitions(
            entry.job_name, status, observed, memo.get("observed"),
            None if agents_before is None else agents_before == "True")
        for event in found:
            _post(body, event)
        memo["observed"] = observed


def _ready(enabled: bool, agents: bool, job: str) -> tuple[str, Any, str, str]:
    if not enabled:
        return condition(READY, True, "Suspended", f"job {job} is suspended")
    if not agents:
        return condition(READY, False, "NoLiveAgent", f"no live agent has a handler for {job}")
    return condition(READY, True, "Ready", f"job {job} is scheduled and handled")


def _invalid(
    runtime: Runtime, body: kopf.Body, owner: str, job: str, exc: Exception,
    old_conditions: Any, set_conditions: Any,
) -> None:
    reason = "InvalidSpec" if isinstance(exc, ValidationError) else _reason(exc)
    message = " ".join(str(exc).split())
    was = [(c.get("reason"), c.get("message")) for c in old_conditions or ()
           if c.get("type") == READY]
    set_conditions(
        condition(SYNCED, False, "InvalidSpec", message),
        condition(READY, False, reason, message),
    )
    prior = runtime.catalog.get(owner)  # keep its database: delete releases what was ours
    runtime.catalog.put(Entry(owner, job, prior.database if prior else DEFAULT, None))
    metrics.INVALID_SPECS.labels(reason).inc()
    if was != [(reason, message)]:
        _post(body, events.Event(events.WARNING, "Invalid", f"{reason}: {message}"))


async def _trigger(
    kube: KubeApi, store: Store, body: kopf.Body, meta: kopf.Meta, status: kopf.Status,
    patch: kopf.Patch, job: str, logger: kopf.Logger,
) -> None:
    """A new claimsched.io/trigger value asks for exactly one manual run (see triggers.py)."""
    annotations = meta.get("annotations") or {}
    wanted = annotations.get(triggers.TRIGGER)
    if not wanted:
        return
    wanted = str(wanted)
    plan = triggers.Plan.decode(annotations.get(triggers.PLAN))
    if triggers.handled(wanted, status.get("lastTrigger"), plan):
        return
    try:
        if plan is None or plan.digest != triggers.digest(wanted):
            plan = triggers.Plan.new(wanted, await asyncio.to_thread(store.db_now))
            await kube.merge_patch(_path(meta.get("namespace"), str(meta.get("name"))),
                                   {"metadata": {"annotations": {triggers.PLAN: plan.encode()}}})
        new = await asyncio.to_thread(store.request_runs, job, [plan.fire_time], "manual")
    except (ClaimschedError, KubeApiError) as exc:
        raise kopf.TemporaryError(f"manual run of {job} not requested: {exc}",
                                  delay=RETRY_DELAY) from exc
    patch.status["lastTrigger"] = triggers.recorded_value(wanted)
    if new:
        _post(body, events.Event(events.NORMAL, "Triggered", (
            f"manual run of job {job} requested (fire time {rfc3339(plan.fire_time)})")))
    else:
        logger.info("manual run of job %s at %s was requested before the operator stopped; "
                    "recording it", job, plan.fire_time)
