"""The operator pods meet every control of the Pod Security "restricted" profile (which includes
"baseline"), checked field by field, plus our stricter read-only root filesystem."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.chart import MATRIX, NAMESPACE, documents, env, one, pod_spec

# Pod Security Standards, restricted: the volume types a pod may use.
RESTRICTED_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                           "persistentVolumeClaim", "projected", "secret"}
# baseline: the only capabilities that may be added (restricted allows just NET_BIND_SERVICE).
RESTRICTED_ADDABLE_CAPABILITIES = {"NET_BIND_SERVICE"}
# baseline: sysctls that are considered safe.
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t",
                 "container_engine_t"}


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"],
            *spec.get("ephemeralContainers", [])]


def effective(pod: dict[str, Any], container: dict[str, Any], field: str) -> Any:
    """A container's setting, falling back to the pod's (as the kubelet does)."""
    own = container.get("securityContext", {})
    return own[field] if field in own else pod.get("securityContext", {}).get(field)


def assert_restricted(spec: dict[str, Any]) -> None:
    pod_sc = spec.get("securityContext", {})
    # baseline: host namespaces
    assert not spec.get("hostNetwork"), "hostNetwork"
    assert not spec.get("hostPID"), "hostPID"
    assert not spec.get("hostIPC"), "hostIPC"
    # baseline: sysctls
    assert {s["name"] for s in pod_sc.get("sysctls", [])} <= SAFE_SYSCTLS
    # restricted: volume types (no hostPath, no other in-tree types)
    for volume in spec.get("volumes", []):
        types = set(volume) - {"name"}
        assert types <= RESTRICTED_VOLUME_TYPES, f"volume {volume['name']}: {types}"
        assert "hostPath" not in volume
    # pod-level seccomp must not be Unconfined; seLinux / AppArmor limits
    if "seccompProfile" in pod_sc:
        assert pod_sc["seccompProfile"]["type"] in {"RuntimeDefault", "Localhost"}
    assert pod_sc.get("seLinuxOptions", {}).get("type") in SELINUX_TYPES
    assert not {"user", "role"} & set(pod_sc.get("seLinuxOptions", {}))
    if "appArmorProfile" in pod_sc:
        assert pod_sc["appArmorProfile"]["type"] in {"RuntimeDefault", "Localhost"}
    assert pod_sc.get("runAsUser") != 0, "pod runAsUser 0"
    assert pod_sc.get("windowsOptions", {}).get("hostProcess") is not True

    for container in containers(spec):
        name = container["name"]
        sc = container.get("securityContext", {})
        # baseline: privileged, hostProcess, host ports, /proc mount
        assert sc.get("privileged") is not True, f"{name}: privileged"
        assert sc.get("windowsOptions", {}).get("hostProcess") is not True
        assert all(not port.get("hostPort") for port in container.get("ports", [])), name
        assert sc.get("procMount", "Default") == "Default", name
        assert sc.get("seLinuxOptions", {}).get("type") in SELINUX_TYPES
        assert not {"user", "role"} & set(sc.get("seLinuxOptions", {}))
        if "appArmorProfile" in sc:
            assert sc["appArmorProfile"]["type"] in {"RuntimeDefault", "Localhost"}
        # restricted: privilege escalation must be explicitly false
        assert sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation"
        # restricted: running as non-root (container or pod), never uid 0
        assert effective(spec, container, "runAsNonRoot") is True, f"{name}: runAsNonRoot"
        assert effective(spec, container, "runAsUser") != 0, f"{name}: runAsUser 0"
        # restricted: seccomp RuntimeDefault or Localhost (container or pod)
        seccomp = effective(spec, container, "seccompProfile")
        assert seccomp and seccomp["type"] in {"RuntimeDefault", "Localhost"}, f"{name}: seccomp"
        # restricted: drop ALL, add at most NET_BIND_SERVICE
        capabilities = sc.get("capabilities", {})
        assert "ALL" in capabilities.get("drop", []), f"{name}: capabilities not dropped"
        assert set(capabilities.get("add", [])) <= RESTRICTED_ADDABLE_CAPABILITIES, name
        # ours: read-only root filesystem
        assert sc.get("readOnlyRootFilesystem") is True, f"{name}: writable root filesystem"


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_operator_pods_meet_the_restricted_pod_security_profile(case: str) -> None:
    assert_restricted(pod_spec(documents(MATRIX[case])))


def test_the_checks_catch_what_restricted_forbids() -> None:
    """The checks above are not vacuous: each violation is caught."""
    base = pod_spec(documents({}))
    breakages = [
        lambda s: s.update(hostNetwork=True),
        lambda s: s.update(hostPID=True),
        lambda s: s.update(hostIPC=True),
        lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        lambda s: s["containers"][0]["securityContext"].update(privileged=True),
        lambda s: s["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
        lambda s: s["containers"][0]["securityContext"].update(runAsNonRoot=False),
        lambda s: s["containers"][0]["securityContext"].update(runAsUser=0),
        lambda s: s["containers"][0]["securityContext"].update(
            seccompProfile={"type": "Unconfined"}),
        lambda s: s["containers"][0]["securityContext"]["capabilities"].update(drop=[]),
        lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
        lambda s: s["containers"][0]["securityContext"].update(readOnlyRootFilesystem=False),
        lambda s: s["containers"][0]["ports"].append({"containerPort": 80, "hostPort": 80}),
        lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
    ]
    for breakage in breakages:
        spec = copy.deepcopy(base)
        breakage(spec)
        with pytest.raises(AssertionError):
            assert_restricted(spec)


def test_pod_defaults_are_explicit() -> None:
    spec = pod_spec(documents({}))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 10001
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # a writable /tmp for the read-only root filesystem, and nothing else
    assert spec["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    # resources and both probes on the health port
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8081, "metrics": 9090}


def test_the_dsn_comes_only_from_an_existing_secret() -> None:
    docs = documents({"database": {"existingSecret": "billing-pg", "secretKey": "uri"}})
    assert env(docs)["CLAIMSCHED_DSN"] == {"secretKeyRef": {"name": "billing-pg", "key": "uri"}}
    assert not [d for d in docs if d["kind"] == "Secret"], "the chart must not create Secrets"
    with pytest.raises(Exception, match="existingSecret"):
        documents({"database": {"existingSecret": ""}})


def test_the_image_is_pinned_and_never_latest() -> None:
    container = pod_spec(documents({}))["containers"][0]
    assert container["image"] == "ghcr.io/claimsched/claimsched-operator:0.2.0"
    digest = "sha256:" + "0f" * 32
    container = pod_spec(documents({"image": {"digest": digest}}))["containers"][0]
    assert container["image"] == f"ghcr.io/claimsched/claimsched-operator@{digest}"
    with pytest.raises(Exception, match="tag"):
        documents({"image": {"tag": "latest"}})


def test_deployment_environment_matches_the_operator_settings() -> None:
    docs = documents({"replicaCount": 2, "watch": {"namespaces": ["shop", "billing"]},
                      "databaseRefs": {"enabled": True}})
    variables = env(docs)
    from claimsched_operator.settings import OperatorSettings

    known = {f.alias or f"CLAIMSCHED_{n.upper()}" for n, f in OperatorSettings.model_fields.items()}
    # every operator setting is set by the chart (the priority only when pinned: one replica)
    assert set(variables) == known - {"CLAIMSCHED_OPERATOR_PRIORITY"}
    assert variables["CLAIMSCHED_OPERATOR_NAMESPACES"] == "shop,billing"
    assert variables["CLAIMSCHED_OPERATOR_PEERING"] == "claimsched"
    assert variables["CLAIMSCHED_OPERATOR_DATABASE_REFS"] == "true"
    assert variables["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert variables["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    defaults = env(documents({}))
    assert defaults["CLAIMSCHED_OPERATOR_NAMESPACES"] == NAMESPACE  # the release namespace
    assert defaults["CLAIMSCHED_OPERATOR_PEERING"] == ""  # standalone
    assert defaults["CLAIMSCHED_OPERATOR_DATABASE_REFS"] == "false"
    assert defaults["CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS"] == "15"
    assert defaults["CLAIMSCHED_OPERATOR_RETENTION_DAYS"] == "90"
    assert defaults["CLAIMSCHED_OPERATOR_MAINTENANCE_INTERVAL_SECONDS"] == "3600"
    assert defaults["CLAIMSCHED_SCHEMA"] == "claimsched"


def test_several_replicas_peer_with_distinct_priorities() -> None:
    docs = documents({"replicaCount": 3})
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    variables = env(docs)
    assert variables["CLAIMSCHED_OPERATOR_PEERING"] == "claimsched"
    # No shared priority: each replica derives its own from POD_NAME.
    assert "CLAIMSCHED_OPERATOR_PRIORITY" not in variables
    assert "POD_NAME" in variables
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    # One replica alone never runs twice, not even during an upgrade.
    assert one(documents({}), "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    # A fixed priority is for a single replica only.
    single = env(documents({"peering": {"enabled": True, "priority": 7}}))
    assert single["CLAIMSCHED_OPERATOR_PRIORITY"] == "7"
    with pytest.raises(Exception, match="priority"):
        documents({"replicaCount": 2, "peering": {"priority": 7}})


def test_pod_disruption_budget_selects_the_operator_pods() -> None:
    docs = documents({})
    pdb = one(docs, "PodDisruptionBudget")
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    pdb = one(documents({"podDisruptionBudget": {"minAvailable": 1}}), "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": pdb["spec"]["selector"]}
    assert not [d for d in documents({"podDisruptionBudget": {"enabled": False}})
                if d["kind"] == "PodDisruptionBudget"]


def test_every_variable_the_chart_sets_is_an_operator_setting() -> None:
    from claimsched_operator.settings import OperatorSettings

    known = {info.alias or f"CLAIMSCHED_{name.upper()}"
             for name, info in OperatorSettings.model_fields.items()}
    for values in ({}, {"replicaCount": 1, "peering": {"enabled": True, "priority": 5},
                        "watch": {"namespaces": ["shop"]}, "databaseRefs": {"enabled": True}}):
        unknown = set(env(documents(values))) - known
        assert not unknown, f"the operator does not read {sorted(unknown)}"
