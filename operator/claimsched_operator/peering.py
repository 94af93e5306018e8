"""kopf peering between the operator's replicas: the peering object has to exist.

kopf does not create it: with a peering name given (mandatory peering), a replica starts paused
and stays paused until it sees the object, and a replica whose keep-alives find no object is
invisible to the others. The operator therefore creates its ClusterKopfPeering (serving all
namespaces) or a KopfPeering in each watched namespace when it logs in, before kopf's
peering starts; "already exists" is the usual answer."""

from __future__ import annotations

import logging
from typing import Any

from .kubeapi import KubeApi, KubeApiError
from .settings import OperatorSettings

log = logging.getLogger("claimsched.operator.peering")

API = "/apis/kopf.dev/v1"


def objects(config: OperatorSettings) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, body) of every peering object this configuration needs."""
    if not config.peering:
        return []
    meta = {"name": config.peering}
    namespaces = config.namespace_list
    if not namespaces:
        return [(f"{API}/clusterkopfpeerings",
                 {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": meta})]
    return [(f"{API}/namespaces/{ns}/kopfpeerings",
             {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": meta})
            for ns in namespaces]


async def ensure(kube: KubeApi, config: OperatorSettings) -> None:
    """Create the missing peering objects; failures are logged (kopf then stays paused)."""
    for path, body in objects(config):
        where = path.rsplit("/", 1)[0]
        try:
            await kube.create(path, body)
        except KubeApiError as exc:
            if exc.status == 409:
                log.debug("peering object %s exists", config.peering,
                          extra={"action": "peering", "peering": config.peering})
                continue
            log.error("cannot create the peering object %s at %s (%s): this replica stays "
                      "paused until it exists", config.peering, where, exc,
                      extra={"action": "peering", "peering": config.peering})
        else:
            log.info("peering object %s created at %s", config.peering, where,
                     extra={"action": "peering", "peering": config.peering})
