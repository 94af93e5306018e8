"""The Kubernetes API permissions the operator needs, per mode. The Helm chart's RBAC is
checked against this list, and a test proves it covers every request the operator makes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Permission:
    api_group: str  # "" is the core group
    resource: str  # plural, with "/subresource" where one is used
    verbs: tuple[str, ...]


CLAIMSCHEDULES = (
    Permission("claimsched.io", "claimschedules", ("get", "list", "watch", "patch")),
    Permission("claimsched.io", "claimschedules/status", ("patch",)),
)
# kopf posts core v1 Events.
EVENTS = (Permission("", "events", ("create",)),)
# Serving all namespaces, kopf lists and watches CRDs to notice the resource appear or change.
# With exact namespaces the operator turns kopf's scanning off (no CRD or namespace requests).
DISCOVERY_CLUSTER = (
    Permission("apiextensions.k8s.io", "customresourcedefinitions", ("list", "watch")),
)
DATABASE_REFS = (Permission("", "secrets", ("get",)),)
# kopf reads and patches the peering object; the operator creates it if missing (peering.py).
PEERING_CLUSTER = (
    Permission("kopf.dev", "clusterkopfpeerings", ("get", "list", "watch", "patch", "create")),
)
PEERING_NAMESPACED = (
    Permission("kopf.dev", "kopfpeerings", ("get", "list", "watch", "patch", "create")),
)


def required(
    *, all_namespaces: bool, database_refs: bool, peering: bool
) -> tuple[Permission, ...]:
    """Every permission of one mode. With given namespaces, the namespaced rules are granted in
    each watched namespace (a Role) and the cluster rules cluster-wide (a ClusterRole)."""
    found = [*CLAIMSCHEDULES, *EVENTS]
    if all_namespaces:
        found += DISCOVERY_CLUSTER
    if database_refs:
        found += DATABASE_REFS
    if peering:
        found += PEERING_CLUSTER if all_namespaces else PEERING_NAMESPACED
    return tuple(found)


def covers(granted: tuple[Permission, ...], api_group: str, resource: str, verb: str) -> bool:
    return any(p.api_group == api_group and p.resource == resource and verb in p.verbs
               for p in granted)
