"""kopf handlers: ClaimSchedule spec in, job_schedule row out; status and Events back.

Module-level handlers in `registry` (main.py runs kopf with it), each given the typed memo
(runtime.Memo) that main.py hands to kopf. Handlers return None: everything reaches the resource's
status through its one writer (writer.Writer; a returned value would land in
`status.<handler id>`, which the CRD rejects)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from claimsched.errors import DatabaseError, InvalidSchedule, InvalidSpec, UnknownTimeZone
from claimsched.records import WriteOutcome
from claimsched.schedule.specs import JobSpec, from_claimschedule

from . import conditions, events, metrics, peering, triggers
from .catalog import Entry
from .conditions import AGENTS_AVAILABLE, PREVIOUS_RELEASED, READY, SYNCED, condition
from .databases import (
    DEFAULT,
    Database,
    DatabaseUnreachable,
    InvalidDatabaseRef,
    open_secret_database,
    read_secret_dsn,
    secret_key,
)
from .models import ClaimScheduleSpec, DatabaseRef, rfc3339
from .observations import Alerting, Observation
from .runtime import Memo, Runtime
from .settings import RETRY_DELAY_SECONDS, status_interval_seconds
from .writer import Wanted, Writer

log = logging.getLogger("claimsched.operator.handlers")

RESOURCE = ("claimsched.io", "v1alpha1", "claimschedules")
STORAGE_PREFIX = "operator.claimsched.io"
FINALIZER = "claimsched.io/finalizer"  # finalizers.py adopts resources with kopf's default
REPORTING_COMPONENT = "claimsched-operator"  # Events say `From: claimsched-operator`

registry = kopf.OperatorRegistry()
#: The status timers' interval, read as this module is imported: kopf takes a timer's interval
#: when its decorator runs (CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS).
STATUS_INTERVAL_SECONDS = status_interval_seconds()


class OwnerConflict(InvalidSpec):
    """Another owner (a code declaration, the CLI, another ClaimSchedule) holds the job."""


class DatabaseRefDisabled(InvalidSpec):
    """spec.databaseRef is disabled in this operator (CLAIMSCHED_OPERATOR_DATABASE_REFS=false):
    remove it to use the operator's default database, or ask for databaseRefs to be enabled."""

    def __init__(self) -> None:
        super().__init__(self.__doc__ or "")


REASONS: tuple[tuple[type[Exception], str], ...] = (
    (OwnerConflict, "Conflict"),
    (DatabaseRefDisabled, "DatabaseRefDisabled"),
    (InvalidDatabaseRef, "InvalidDatabaseRef"),
    (InvalidSchedule, "InvalidSchedule"),
    (UnknownTimeZone, "UnknownTimeZone"),
)


def _reason(exc: Exception) -> str:
    return next((reason for kind, reason in REASONS if isinstance(exc, kind)), "InvalidSpec")


# -- the operator ------------------------------------------------------------------------------

@kopf.on.startup(registry=registry)
async def startup(settings: kopf.OperatorSettings, memo: Memo, **_: Any) -> None:
    config = memo.runtime.config
    settings.persistence.finalizer = FINALIZER
    settings.posting.reporting_component = REPORTING_COMPONENT
    settings.posting.reporting_instance = os.environ.get("POD_NAME") or socket.gethostname()
    settings.posting.event_name_prefix = "claimsched-"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=STORAGE_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=STORAGE_PREFIX)
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
    metrics.serve(config.metrics_port)
    await memo.runtime.start()
    log.info("claimsched operator started", extra={"action": "startup"})


@kopf.on.login(registry=registry)
async def login(memo: Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (no client library).
    The operator's own requests use the same credentials; the peering object is made
    here, before kopf's peering (which starts only once a login succeeded) looks for it."""
    info: kopf.ConnectionInfo | None = (
        kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs))
    if info is not None:
        memo.runtime.kube.use(info)
        await peering.ensure(memo.runtime.kube, memo.runtime.config)
    return info


@kopf.on.cleanup(registry=registry)
async def cleanup(memo: Memo, **_: Any) -> None:
    await memo.runtime.stop()


# -- each ClaimSchedule ------------------------------------------------------------------------

@kopf.on.resume(*RESOURCE, registry=registry)
@kopf.on.create(*RESOURCE, registry=registry)
@kopf.on.update(*RESOURCE, registry=registry)
async def reconcile(**kwargs: Any) -> None:
    """A ClaimSchedule was created, changed, or is seen again after a restart."""
    await sync(**kwargs)


async def sync(
    *, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
    namespace: str | None, name: str, patch: kopf.Patch, memo: Memo, logger: kopf.Logger,
    **_: Any,
) -> None:
    """Validate the spec, write its row in its database, then handle a new trigger value."""
    runtime = memo.runtime
    owner = f"{namespace}/{name}"
    job = str(spec.get("jobName") or name)
    generation = meta.get("generation")
    found = Writer(runtime.written, owner, status, generation, patch)
    found.put("observedGeneration", generation)
    found.put("jobName", job[:63])
    try:
        parsed = ClaimScheduleSpec.model_validate(dict(spec))
        job_spec = from_claimschedule(dict(body), source="operator")
        database = await _database(runtime, namespace, parsed)
        left = await _release_where_it_was(runtime, owner, status, database.fingerprint, logger)
        synced = await asyncio.to_thread(database.owned.sync, job_spec)
        if synced.held_by is not None:
            raise OwnerConflict(f"job {job!r} belongs to {synced.held_by}: it is left alone; "
                                "set a different spec.jobName")
    except (ValidationError, InvalidSpec, InvalidSchedule, UnknownTimeZone) as exc:
        _invalid(runtime, body, owner, job, exc, found)
        return
    except DatabaseError as exc:
        reason = "DatabaseUnreachable" if isinstance(exc, DatabaseUnreachable) \
            else "DatabaseUnavailable"
        found.conditions(condition(SYNCED, False, reason, str(exc)),
                         condition(READY, False, reason, str(exc)))
        raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY_SECONDS) from None
    schedule = job_spec.parsed
    found.put("resolvedSchedule", schedule.resolved)
    alerting = Alerting(parsed.starting_deadline_seconds, parsed.failure_threshold,
                        parsed.recovery_threshold)
    entry = Entry(owner, job, database.name, job_spec, schedule, alerting,
                  status.get("failing") is True)
    runtime.catalog.put(entry)
    found.put("database", database.fingerprint)
    _moved(body, job, status, database.fingerprint, left, found)
    _synced(body, job_spec, synced.outcome, found, _late_since(runtime.catalog.observation(entry)))
    logger.info("job %s synced: %s", job, synced.outcome)
    await triggers.request(database.owned, body, found, job, logger)


@kopf.on.delete(*RESOURCE, registry=registry)
async def delete(
    *, spec: kopf.Spec, status: kopf.Status, namespace: str | None, name: str, memo: Memo,
    logger: kopf.Logger, **_: Any,
) -> None:
    """A ClaimSchedule is deleted: release its row (`release`)."""
    await release(spec, status, namespace, name, memo, logger)


async def release(spec: kopf.Spec, status: kopf.Status, namespace: str | None, name: str,
                  memo: Memo, logger: kopf.Logger) -> None:
    """Disable the row this resource owns and let go of it; its runs and effects stay.

    From the resource itself, not from memory: kopf does not resume a resource that is being
    deleted, so after a restart the catalog may never have seen it. Its database comes from its
    own databaseRef (or the default), and the row is released by owner in SQL; so is a row in
    the database its status says the row was in (its Secret rotated while the operator was
    down), when the operator can reach that one."""
    runtime = memo.runtime
    owner = f"{namespace}/{name}"
    try:
        database = await _database_of(runtime, namespace, spec)
    except InvalidSpec as exc:  # its Secret is gone: nothing of ours can be reached there
        logger.warning("ClaimSchedule %s: its row is not released: %s", owner, exc)
        database = None
    except DatabaseError as exc:
        raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY_SECONDS) from None
    if database is not None:
        try:
            released = await asyncio.to_thread(database.owned.release, owner)
        except DatabaseError as exc:
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY_SECONDS) from None
        if released is not None:
            runtime.counter.forget(released)
            logger.info("job %s disabled and released; its history is kept", released)
    await _release_where_it_was(runtime, owner, status,
                                database.fingerprint if database is not None else None, logger)
    runtime.catalog.drop(owner)
    runtime.written.forget(owner)


async def _release_where_it_was(runtime: Runtime, owner: str, status: kopf.Status,
                                keep: str | None, logger: kopf.Logger) -> list[str]:
    """Release the row (as a delete would) in every database but `keep` (the fingerprint of the
    one it is written in now) that the status says it was written in (`database`: a Secret
    rotated to another database, a changed databaseRef, while the operator ran or not;
    `unreleasedDatabases`: left there before). From the resource's status, not from memory, so
    that a restart in between changes nothing. The fingerprints it could not release in (this
    process never had a DSN for them, or cannot reach them), to be tried again later."""
    before = [*(status.get("unreleasedDatabases") or ()), status.get("database")]
    left = []
    for fingerprint in dict.fromkeys(str(f) for f in before if f):
        if fingerprint == keep:
            continue
        try:
            released = await asyncio.to_thread(runtime.databases.release_in, fingerprint, owner)
        except DatabaseError as exc:
            logger.warning("ClaimSchedule %s: its row is not released in the database it was "
                           "in before: %s", owner, exc)
            left.append(fingerprint)
            continue
        if released is not None:
            logger.info("job %s disabled and released in database %s, where it was before; its "
                        "history is kept there", released, fingerprint)
    return left


def _moved(body: kopf.Body, job: str, status: kopf.Status, fingerprint: str, left: list[str],
           found: Writer) -> None:
    """Status, condition and Event for the databases a row is still left in (none: released),
    once a row has moved (a resource that never moved gets no such condition)."""
    was = list(status.get("unreleasedDatabases") or ())
    moved = status.get("database") not in (None, fingerprint)
    if was != left:
        found.put("unreleasedDatabases", left or None)
    if left:
        message = (f"job {job}'s row in database {', '.join(left)} (where it was written "
                   "before) is not released and may still fire there: this operator has no DSN "
                   "for that database (its Secret was rotated while the operator was down) or "
                   "cannot reach it. It is released once the operator reaches that database "
                   "again (the default DSN or any databaseRef naming it); else release it there "
                   "by hand (docs/pages/how-it-works/ownership.md, \"Where a ClaimSchedule's "
                   "row lives\")")
        if was != left or found.status_of(PREVIOUS_RELEASED) != "False":
            events.post(body, events.Event(events.WARNING, "PreviousDatabaseUnreachable",
                                           message))
        found.conditions(
            condition(PREVIOUS_RELEASED, False, "PreviousDatabaseUnreachable", message))
    elif was or moved:
        found.conditions(condition(PREVIOUS_RELEASED, True, "Released",
                                   f"job {job}'s row is released in the databases it was in "
                                   "before"))


@kopf.timer(*RESOURCE, interval=STATUS_INTERVAL_SECONDS, registry=registry)
def publish(
    *, body: kopf.Body, meta: kopf.Meta, status: kopf.Status, namespace: str | None, name: str,
    patch: kopf.Patch, memo: Memo, **_: Any,
) -> None:
    """The status timer: patch what the last refresh observed, post Events on transitions."""
    runtime = memo.runtime
    owner = f"{namespace}/{name}"
    entry = runtime.catalog.get(owner)
    observed = runtime.catalog.observation(entry) if entry is not None else None
    if entry is None or entry.spec is None or observed is None:
        return
    found = Writer(runtime.written, owner, status, meta.get("generation"), patch)
    found.observed(observed.status)
    agents_before = found.status_of(AGENTS_AVAILABLE)
    live = observed.status.live_agents
    wanted = [condition(AGENTS_AVAILABLE, live > 0, "AgentsAvailable" if live else "NoLiveAgent",
                        f"{live} live agent(s) handle job {entry.job_name}")]
    if found.status_of(SYNCED) == "True":
        wanted.append(_ready(entry.spec, live > 0, datetime.now(UTC), _late_since(observed)))
    found.conditions(*wanted)
    for event in events.transitions(entry.job_name, status, observed, memo.observed,
                                    None if agents_before is None else agents_before == "True"):
        events.post(body, event)
    memo.observed = observed


#: Ready reasons a change of the Secret alone may cure (a resource invalid for another reason
#: waits for a change of its own).
SECRET_REASONS = ("InvalidDatabaseRef", "DatabaseUnreachable")


@kopf.timer(*RESOURCE, interval=STATUS_INTERVAL_SECONDS, registry=registry)
async def rotate(*, spec: kopf.Spec, status: kopf.Status, namespace: str | None, name: str,
                 memo: Memo, logger: kopf.Logger, **kwargs: Any) -> None:
    """The databaseRef timer: sync again when a database the row was left in is known now (see
    `_release_where_it_was`), or when the resource's Secret holds another DSN than the one in
    use (a rotated DSN, a Secret created or fixed since), without a change to the resource."""
    runtime = memo.runtime
    if any(runtime.databases.reaches(str(f)) for f in status.get("unreleasedDatabases") or ()):
        logger.debug("a database its row was left in is known now: syncing again")
        await sync(spec=spec, status=status, namespace=namespace, name=name, memo=memo,
                   logger=logger, **kwargs)
        return
    if not spec.get("databaseRef") or not namespace or not runtime.config.database_refs:
        return
    found = runtime.written.conditions(f"{namespace}/{name}", status.get("conditions"))
    ready = next((c for c in found or () if c.get("type") == READY), {})
    if conditions.status_of(found, SYNCED) != "True" and ready.get("reason") not in SECRET_REASONS:
        return
    try:
        ref = DatabaseRef.model_validate(spec["databaseRef"])
        dsn = await read_secret_dsn(runtime.kube, namespace, ref)
    except (ValidationError, InvalidSpec, DatabaseError):
        return  # reconcile reports it
    if runtime.databases.dsn_of(secret_key(namespace, ref)) != dsn:
        logger.info("Secret %s/%s changed: syncing again", namespace, ref.name)
        await sync(spec=spec, status=status, namespace=namespace, name=name, memo=memo,
                   logger=logger, **kwargs)


# -- helpers -----------------------------------------------------------------------------------

async def _database(runtime: Runtime, namespace: str | None,
                    parsed: ClaimScheduleSpec) -> Database:
    """The database of a valid spec: its databaseRef's (when enabled), else the default."""
    if parsed.database_ref is not None and namespace and not runtime.config.database_refs:
        raise DatabaseRefDisabled()
    return await _open(runtime, namespace, parsed.database_ref)


async def _database_of(runtime: Runtime, namespace: str | None,
                       spec: Mapping[str, Any]) -> Database | None:
    """The database a resource's row is in, from its spec alone (even an invalid one); None when
    it has none (a databaseRef while they are disabled, no default DSN)."""
    try:
        ref = DatabaseRef.model_validate(spec["databaseRef"]) if spec.get("databaseRef") \
            else None
    except ValidationError:
        return None
    if (ref is not None and not runtime.config.database_refs) or \
            (ref is None and not runtime.databases.default_dsn):
        return None
    return await _open(runtime, namespace, ref)


async def _open(runtime: Runtime, namespace: str | None, ref: DatabaseRef | None) -> Database:
    if ref is not None and namespace:
        dsn = await read_secret_dsn(runtime.kube, namespace, ref)
        return await asyncio.to_thread(open_secret_database, runtime.databases, namespace, ref,
                                       dsn)
    return await asyncio.to_thread(runtime.databases.get, DEFAULT)


def _synced(body: kopf.Body, spec: JobSpec, outcome: WriteOutcome, found: Writer,
            late_since: str | None) -> None:
    """Conditions, metrics and an Event (when something changed) for a row written;
    `late_since`: what the last status refresh said (`_late_since`)."""
    metrics.SCHEDULES_SYNCED.labels(outcome).inc()
    resolved = spec.parsed.resolved
    shown = spec.schedule if resolved == spec.schedule else f"{spec.schedule} (= {resolved})"
    message = (f"job {spec.job_name} runs {shown} in {spec.time_zone}"
               + (" (suspended)" if not spec.enabled else "")
               + (f" (suspended until {rfc3339(spec.suspend_until)})"
                  if spec.enabled and spec.suspend_until else ""))
    found.conditions(condition(SYNCED, True, "Synced", message),
                     _ready(spec, found.status_of(AGENTS_AVAILABLE) != "False",
                            datetime.now(UTC), late_since))
    if outcome != "unchanged" or found.status_of(SYNCED) != "True":
        events.post(body, events.Event(events.NORMAL, "Synced", f"{message}: row {outcome}"))


def _ready(spec: JobSpec, agents: bool, now: datetime, late_since: str | None) -> Wanted:
    """Ready: suspended (True), else False while no live agent handles the job or it is late
    (claimsched.schedule.deadlines; `late_since`: the oldest occurrence without a run), else
    True."""
    job = spec.job_name
    if spec.suspended_at(now):
        until = f" until {rfc3339(spec.suspend_until)}" if spec.enabled and spec.suspend_until \
            else ""
        reason = f": {spec.suspend_reason}" if spec.suspend_reason else ""
        return condition(READY, True, "Suspended", f"job {job} is suspended{until}{reason}")
    late = f"late: no run of its occurrences since {late_since}" if late_since else None
    if not agents:
        return condition(READY, False, "NoLiveAgent", f"no live agent has a handler for {job}"
                         + (f"; {late}" if late else ""))
    if late:
        return condition(READY, False, "Late", f"job {job} is {late}")
    return condition(READY, True, "Ready", f"job {job} is scheduled and handled")


def _late_since(observed: Observation | None) -> str | None:
    """The oldest occurrence without a run while the job is late, as the status says it."""
    if observed is None or not observed.status.late:
        return None
    return observed.status.late_fire_time


def _invalid(runtime: Runtime, body: kopf.Body, owner: str, job: str, exc: Exception,
             found: Writer) -> None:
    reason = _reason(exc)
    message = " ".join(str(exc).split())
    was = [(c.get("reason"), c.get("message")) for c in found.before or ()
           if c.get("type") == READY]
    found.conditions(
        condition(SYNCED, False, "Conflict" if reason == "Conflict" else "InvalidSpec", message),
        condition(READY, False, reason, message))
    found.put("resolvedSchedule", None)
    runtime.catalog.put(Entry(owner, job, DEFAULT, None))
    metrics.INVALID_SPECS.labels(reason).inc()
    if was != [(reason, message)]:
        events.post(body, events.Event(events.WARNING, reason, message))
