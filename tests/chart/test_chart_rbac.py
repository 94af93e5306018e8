"""The chart grants the operator exactly what it uses, no wildcards, in the narrowest scope.

The source of truth for "what the operator uses" is operator/claimsched_operator/permissions.py,
which the operator's own tests prove against the requests the real operator makes. Here the
chart's rendered Role/ClusterRole rules are compared with it, mode by mode.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
from collections.abc import Iterable
from typing import Any

import pytest

from tests.chart.chart import NAMESPACE, RELEASE, documents, env, of_kind, walk

Triple = tuple[str, str, str]  # (apiGroup, resource, verb)
WATCHED = ["shop", "billing"]
CLUSTER_SCOPED = {("apiextensions.k8s.io", "customresourcedefinitions"), ("", "namespaces"),
                  ("kopf.dev", "clusterkopfpeerings")}

MODES = [
    pytest.param(clusterwide, refs, peering,
                 id=f"{'all' if clusterwide else 'given'}-namespaces"
                    f"{'-databaseRef' if refs else ''}{'-peering' if peering else ''}")
    for clusterwide, refs, peering in itertools.product([True, False], repeat=3)
]


def values_for(clusterwide: bool, database_refs: bool, peering: bool) -> dict[str, Any]:
    return {"watch": {"allNamespaces": True} if clusterwide else {"namespaces": WATCHED},
            "databaseRefs": {"enabled": database_refs},
            "replicaCount": 2 if peering else 1}


def triples(rules: Iterable[dict[str, Any]]) -> set[Triple]:
    return {(group, resource, verb)
            for rule in rules
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]}


def granted(docs: list[dict[str, Any]]) -> dict[str, set[Triple]]:
    """What the chart grants: "cluster" (ClusterRoles) and each namespace (Roles)."""
    out: dict[str, set[Triple]] = {}
    for role in of_kind(docs, "ClusterRole"):
        out.setdefault("cluster", set()).update(triples(role["rules"]))
    for role in of_kind(docs, "Role"):
        out.setdefault(role["metadata"]["namespace"], set()).update(triples(role["rules"]))
    return out


# What the operator uses, per mode, as the chart README documents it. The comparison with
# permissions.py below is the one that matters; this table pins the chart on its own.
def documented(clusterwide: bool, database_refs: bool, peering: bool) -> set[Triple]:
    needed = {("claimsched.io", "claimschedules", verb) for verb in ("get", "list", "watch",
                                                                     "patch")}
    needed |= {("claimsched.io", "claimschedules/status", "patch"), ("", "events", "create")}
    if database_refs:
        needed.add(("", "secrets", "get"))
    if clusterwide:
        needed |= {("apiextensions.k8s.io", "customresourcedefinitions", v)
                   for v in ("list", "watch")}
    if peering:
        resource = "clusterkopfpeerings" if clusterwide else "kopfpeerings"
        needed |= {("kopf.dev", resource, v) for v in ("get", "list", "watch", "patch", "create")}
    return needed


@pytest.mark.parametrize(("clusterwide", "database_refs", "peering"), MODES)
def test_rbac_is_scoped_to_the_watched_namespaces(
        clusterwide: bool, database_refs: bool, peering: bool) -> None:
    docs = documents(values_for(clusterwide, database_refs, peering))
    grants = granted(docs)
    if clusterwide:
        assert set(grants) == {"cluster"}, "serving all namespaces: one ClusterRole, no Roles"
        (binding,) = of_kind(docs, "ClusterRoleBinding")
        assert not of_kind(docs, "RoleBinding")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": RELEASE}
        bindings = [binding]
    else:
        assert set(grants) == set(WATCHED), "given namespaces: a Role in each, nothing else"
        assert not of_kind(docs, "ClusterRole") and not of_kind(docs, "ClusterRoleBinding")
        bindings = of_kind(docs, "RoleBinding")
        assert {b["metadata"]["namespace"] for b in bindings} == set(WATCHED)
        for binding in bindings:
            assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                          "kind": "Role", "name": RELEASE}
        assert len({frozenset(g) for g in grants.values()}) == 1, "the Roles differ"
        # Cluster-scoped resources cannot be granted by a Role: none may appear in one.
        for grant in grants.values():
            assert not {(g, r) for g, r, _ in grant} & CLUSTER_SCOPED
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE,
                                        "namespace": NAMESPACE}]
    for grant in grants.values():
        assert grant == documented(clusterwide, database_refs, peering)


@pytest.mark.parametrize(("clusterwide", "database_refs", "peering"), MODES)
def test_rbac_has_no_wildcards_and_no_resource_it_does_not_name(
        clusterwide: bool, database_refs: bool, peering: bool) -> None:
    docs = documents(values_for(clusterwide, database_refs, peering))
    for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
        assert "aggregationRule" not in role
        for path, value in walk(role["rules"]):
            assert value != "*" and not (isinstance(value, str) and "*" in value), path
        for rule in role["rules"]:
            assert set(rule) == {"apiGroups", "resources", "verbs"}, "no nonResourceURLs"
        granted_resources = {(g, r) for g, r, _ in triples(role["rules"])}
        assert ("", "secrets") not in granted_resources or database_refs
        for _group, _resource, verb in triples(role["rules"]):
            assert verb not in {"delete", "deletecollection", "update", "escalate", "bind",
                                "impersonate"}, verb


def test_rbac_can_be_left_to_the_cluster_admin() -> None:
    kinds = {doc["kind"] for doc in documents({"rbac": {"create": False}})}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


# -- against the operator's own list ------------------------------------------------------------

_ALIASES = {
    "clusterwide": ("clusterwide", "cluster_wide", "all_namespaces", "cluster"),
    "database_refs": ("database_refs", "databaseref", "database_ref", "secrets", "refs"),
    "peering": ("peering", "peered"),
    "namespaces": ("namespaces",),
}


def _normalise(entries: Any) -> set[Triple]:
    """permissions.py entries -> triples. Accepts (group, resource, verbs) tuples, PolicyRule
    dicts, or objects with api_group/group + resource(s) + verbs attributes."""
    out: set[Triple] = set()
    for entry in entries:
        if isinstance(entry, dict):
            if "apiGroups" in entry:
                out |= triples([entry])
                continue
            group = entry.get("api_group", entry.get("apiGroup", entry.get("group")))
            resource = entry.get("resource", entry.get("resources"))
            verbs = entry["verbs"]
        elif isinstance(entry, tuple | list):
            group, resource, verbs = entry
        else:
            group = next(getattr(entry, a) for a in ("api_group", "apiGroup", "group")
                         if hasattr(entry, a))
            resource = getattr(entry, "resource", None) or entry.resources
            verbs = entry.verbs
        resources = [resource] if isinstance(resource, str) else list(resource)
        verbs = [verbs] if isinstance(verbs, str) else list(verbs)
        out |= {(group, r, v) for r in resources for v in verbs}
    return out


def operator_permissions(clusterwide: bool, database_refs: bool, peering: bool) -> set[Triple]:
    """What operator/claimsched_operator/permissions.py says the operator uses in this mode."""
    module = importlib.import_module("claimsched_operator.permissions")
    wanted = {"clusterwide": clusterwide, "database_refs": database_refs, "peering": peering,
              "namespaces": [] if clusterwide else WATCHED}
    for name, function in inspect.getmembers(module, inspect.isfunction):
        if function.__module__ != module.__name__ or name.startswith("_"):
            continue
        parameters = inspect.signature(function).parameters
        arguments: dict[str, Any] = {}
        for parameter in parameters:
            key = next((k for k, aliases in _ALIASES.items() if parameter.lower() in aliases),
                       None)
            if key is None:
                break
            arguments[parameter] = wanted[key]
        else:
            if arguments:
                return _normalise(function(**arguments))
    raise AssertionError(
        "claimsched_operator.permissions has no function taking (clusterwide, database_refs, "
        "peering) keywords; the chart test cannot read the operator's permissions")


@pytest.mark.parametrize(("clusterwide", "database_refs", "peering"), MODES)
def test_rbac_grants_exactly_what_the_operator_uses(
        clusterwide: bool, database_refs: bool, peering: bool) -> None:
    expected = operator_permissions(clusterwide, database_refs, peering)
    for triple in expected:
        assert "*" not in "".join(triple), "permissions.py itself must not use wildcards"
    grants = granted(documents(values_for(clusterwide, database_refs, peering)))
    everything = set().union(*grants.values())
    missing, extra = expected - everything, everything - expected
    assert not missing and not extra, f"chart lacks {sorted(missing)}; grants {sorted(extra)}"


def test_by_default_the_operator_serves_only_the_release_namespace() -> None:
    # A multi-team cluster: one team's operator sees one namespace unless told otherwise.
    docs = documents()
    assert set(granted(docs)) == {NAMESPACE}
    assert not of_kind(docs, "ClusterRole") and not of_kind(docs, "ClusterRoleBinding")
    assert env(docs)["CLAIMSCHED_OPERATOR_NAMESPACES"] == NAMESPACE
    assert env(documents({"watch": {"allNamespaces": True}}))[
        "CLAIMSCHED_OPERATOR_NAMESPACES"] == ""


def test_all_namespaces_and_a_namespace_list_together_are_refused() -> None:
    with pytest.raises(Exception, match="either allNamespaces or namespaces"):
        documents({"watch": {"allNamespaces": True, "namespaces": ["shop"]}})
