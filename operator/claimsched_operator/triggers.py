"""Manual runs from the `claimsched.io/trigger` annotation: one run per value of a resource, even
when the operator dies half-way or two operators (not peered) handle the same resource.

The run (a `job_runs` row in Postgres) and the record that it was asked for
(`status.lastTrigger` in Kubernetes) cannot be written together, and two operators may both see
a value that no status records yet. So the database holds the invariant: the trigger's key, a
digest of the resource's uid and the value, is inserted with the run in one statement
(`OwnedSchedules.trigger`), and whoever comes second with the same key inserts nothing:

- dies before the run: nothing was asked for; the next attempt asks;
- dies after the run, before `lastTrigger`: the next attempt inserts nothing and records it;
- another operator handles the same value at the same time: one of them inserts the run.

A value is never run twice for one resource (the CRD says so): setting it back after another
value records it and asks for nothing. A re-created resource has a new uid, so a new history."""

from __future__ import annotations

import asyncio
import hashlib
import json

import kopf

from claimsched.db import OwnedSchedules
from claimsched.errors import ClaimschedError

from . import events
from .models import rfc3339
from .settings import RETRY_DELAY_SECONDS
from .writer import Writer

TRIGGER = "claimsched.io/trigger"
LAST_TRIGGER_LENGTH = 253  # status.lastTrigger's maxLength


def key(uid: str, value: str) -> str:
    """The trigger's key in the database: one per resource and value (values may be long)."""
    return hashlib.sha256(json.dumps([uid, value]).encode()).hexdigest()


def recorded_value(value: str) -> str:
    """What status.lastTrigger holds once `value` was handled."""
    return value[:LAST_TRIGGER_LENGTH]


def handled(value: str, last_trigger: str | None) -> bool:
    """Whether status.lastTrigger shows `value` handled already. Only a saving: a value too
    long to be recorded whole is asked for again each time, and the database says no."""
    return len(value) <= LAST_TRIGGER_LENGTH and last_trigger == value


async def request(
    owned: OwnedSchedules, body: kopf.Body, writer: Writer, job: str, logger: kopf.Logger
) -> None:
    """Turn a new claimsched.io/trigger value into exactly one manual run of `job`, and record
    the value in status.lastTrigger."""
    wanted = (body.metadata.annotations or {}).get(TRIGGER)
    if not wanted or handled(wanted, body.status.get("lastTrigger")):
        return
    trigger_key = key(str(body.metadata.uid), wanted)
    try:
        fire_time = await asyncio.to_thread(owned.trigger, job, trigger_key)
    except ClaimschedError as exc:
        raise kopf.TemporaryError(f"manual run of {job} not requested: {exc}",
                                  delay=RETRY_DELAY_SECONDS) from exc
    writer.put("lastTrigger", recorded_value(wanted))
    if fire_time is None:
        logger.info("trigger %r of job %s: its run was requested before (a retry, or another "
                    "operator); recording it", wanted, job)
        return
    message = f"manual run of job {job} requested (fire time {rfc3339(fire_time)})"
    logger.info("trigger %r of job %s: %s", wanted, job, message)
    events.post(body, events.Event(events.NORMAL, "Triggered", message))
