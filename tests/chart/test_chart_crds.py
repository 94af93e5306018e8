"""The chart's CRD is the repository's CRD; it is gated by crds.enabled and kept on uninstall."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.chart import CHART, CRD_SOURCE, KUBE_VERSIONS, documents, load, of_kind
from tests.helpers.crd_schema import load_crd

CHART_COPY = CHART / "files" / "crds" / "claimschedule.yaml"
KEEP = {"helm.sh/resource-policy": "keep"}


def crds(values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc
            for doc in of_kind(documents(values), "CustomResourceDefinition")}


def test_chart_copy_of_the_crd_is_byte_identical_to_the_source() -> None:
    assert CHART_COPY.read_bytes() == CRD_SOURCE.read_bytes(), (
        "charts/claimsched/files/crds/claimschedule.yaml drifted from crds/claimschedule.yaml: "
        "cp crds/claimschedule.yaml charts/claimsched/files/crds/")


def test_chart_has_no_untemplated_crds_folder() -> None:
    # Helm would install crds/ unconditionally and never upgrade it: the CRD lives in templates/.
    assert not (CHART / "crds").exists()
    with load() as chart:
        assert chart.crds == []
        assert any(f["name"] == "files/crds/claimschedule.yaml" for f in chart.files)


def test_rendered_crd_equals_the_source_except_for_release_labels_and_keep() -> None:
    source = yaml.safe_load(CRD_SOURCE.read_text())
    rendered = crds()["claimschedules.claimsched.io"]
    assert {k: v for k, v in rendered.items() if k != "metadata"} == \
        {k: v for k, v in source.items() if k != "metadata"}
    assert rendered["metadata"]["name"] == source["metadata"]["name"]
    assert source["metadata"]["labels"].items() <= rendered["metadata"]["labels"].items()
    assert rendered["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert rendered["metadata"]["annotations"] == KEEP
    assert set(rendered["metadata"]) == {"name", "labels", "annotations"}


def test_rendered_crd_schema_still_validates_the_example_claimschedules(tmp_path: Any) -> None:
    rendered = crds()["claimschedules.claimsched.io"]
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(rendered))
    crd = load_crd(path)
    assert crd.structural_errors() == []
    crd.validate({"apiVersion": "claimsched.io/v1alpha1", "kind": "ClaimSchedule",
                  "metadata": {"name": "x", "namespace": "y"},
                  "spec": {"schedule": "@every 10s"}})


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_crds_validate_as_kubernetes_objects(kube: str) -> None:
    for crd in crds({"replicaCount": 2}).values():
        kubernetes_validate.validate(crd, kube, strict=True)


def test_crds_are_gated_by_crds_enabled() -> None:
    assert set(crds()) == {"claimschedules.claimsched.io"}
    assert crds({"crds": {"enabled": False}}) == {}
    assert crds({"crds": {"enabled": False}, "replicaCount": 3}) == {}


def test_crds_are_kept_on_uninstall_unless_told_otherwise() -> None:
    for crd in crds({"replicaCount": 2}).values():
        assert crd["metadata"]["annotations"] == KEEP
    for crd in crds({"replicaCount": 2, "crds": {"keep": False}}).values():
        assert "annotations" not in crd["metadata"]


@pytest.mark.parametrize(("watch", "name", "scope", "kind"), [
    ({"allNamespaces": True}, "clusterkopfpeerings.kopf.dev", "Cluster", "ClusterKopfPeering"),
    ({"namespaces": ["shop"]}, "kopfpeerings.kopf.dev", "Namespaced", "KopfPeering"),
    ({}, "kopfpeerings.kopf.dev", "Namespaced", "KopfPeering"),
])
def test_kopf_peering_crd_comes_with_peering_in_the_scope_kopf_uses(
        watch: dict[str, Any], name: str, scope: str, kind: str) -> None:
    for values in ({"replicaCount": 2}, {"peering": {"enabled": True}}):
        found = crds({**values, "watch": watch})
        assert set(found) == {"claimschedules.claimsched.io", name}
        peering = found[name]
        assert peering["spec"]["group"] == "kopf.dev"
        assert peering["spec"]["scope"] == scope
        assert peering["spec"]["names"]["kind"] == kind
        (version,) = peering["spec"]["versions"]
        assert version["name"] == "v1" and version["served"] and version["storage"]
        # kopf patches the keep-alives into .status through the main resource.
        assert "subresources" not in version
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert set(crds({"watch": watch})) == {"claimschedules.claimsched.io"}


def test_kopf_finds_the_peering_resources_it_looks_for() -> None:
    from kopf._cogs.structs import references

    for watch, selector in [({"allNamespaces": True}, references.CLUSTER_PEERINGS_K),
                            ({"namespaces": ["shop"]}, references.NAMESPACED_PEERINGS_K)]:
        crd = next(c for c in crds({"replicaCount": 2, "watch": watch})
                   .values() if c["spec"]["group"] == "kopf.dev")
        names = crd["spec"]["names"]
        resource = references.Resource(
            group=crd["spec"]["group"], version=crd["spec"]["versions"][0]["name"],
            plural=names["plural"], kind=names["kind"], singular=names["singular"],
            namespaced=crd["spec"]["scope"] == "Namespaced", verbs=frozenset({"list", "watch"}))
        assert selector.check(resource)
