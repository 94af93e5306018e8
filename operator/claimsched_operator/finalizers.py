"""The operator's finalizer on ClaimSchedules, `claimsched.io/finalizer`, and the adoption of
resources that still carry kopf's default marker from releases that used it."""

from __future__ import annotations

from typing import Any

import kopf

from .handlers import FINALIZER, RESOURCE, registry, release
from .runtime import Memo

LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"  # kopf's default: 0.1.0's resources


def _drop_legacy(body: kopf.RawBody) -> None:
    """Remove the legacy marker from `body` (a kopf patch function: kopf turns the change
    into the patch it sends; its own finalizer is added by kopf in the same patch)."""
    finalizers = body.get("metadata", {}).get("finalizers", [])
    while LEGACY_FINALIZER in finalizers:
        finalizers.remove(LEGACY_FINALIZER)


@kopf.on.event(*RESOURCE, registry=registry)
async def adopt_legacy_finalizer(
    *, meta: kopf.Meta, patch: kopf.Patch, spec: kopf.Spec, status: kopf.Status,
    namespace: str | None, name: str, memo: Memo, logger: kopf.Logger, **_: Any,
) -> None:
    """A ClaimSchedule with the legacy marker gets ours instead. One being deleted with the
    legacy marker only (kopf never ran our deletion for it) is released as a delete would
    release it, then let go."""
    if LEGACY_FINALIZER not in (meta.get("finalizers") or ()):
        return
    if meta.get("deletionTimestamp") and FINALIZER not in (meta.get("finalizers") or ()):
        await release(spec, status, namespace, name, memo, logger)
    patch.fns.append(_drop_legacy)
    logger.info("finalizer %s replaced by %s", LEGACY_FINALIZER, FINALIZER)
