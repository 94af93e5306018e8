"""values.yaml is fully documented, values.schema.json is closed everywhere and refuses bad
values (enforced by Helm itself, through helm-python-sdk)."""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python
import pytest
import yaml

from tests.chart.chart import CHART, MATRIX, load

VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"
README = CHART / "README.md"


def key_lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """Dotted key path -> 0-based line of the key in values.yaml."""
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = f"{prefix}{key.value}"
            out[path] = key.start_mark.line
            out.update(key_lines(value, path + "."))
    return out


def readme_keys() -> list[str]:
    table = README.read_text().split("## Values", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)


def test_every_documented_value_has_a_comment_in_values_yaml() -> None:
    lines = VALUES.read_text().splitlines()
    positions = key_lines(yaml.compose(VALUES.read_text()))
    keys = readme_keys()
    assert keys, "the README has no values table"
    for key in keys:
        assert key in positions, f"README lists {key}, values.yaml does not have it"
        above = lines[positions[key] - 1].strip()
        assert above.startswith("#"), f"{key} has no comment above it in values.yaml"


def test_the_readme_lists_every_value() -> None:
    documented = set(readme_keys())
    positions = key_lines(yaml.compose(VALUES.read_text()))
    leaves = [p for p in positions if not any(q.startswith(p + ".") for q in positions)]
    for path in leaves:
        prefixes = {".".join(path.split(".")[:n]) for n in range(1, path.count(".") + 2)}
        assert prefixes & documented, f"{path} is neither listed in the README nor under a " \
                                      "listed key"
    # ...and lists nothing that does not exist, each key once.
    assert len(documented) == len(readme_keys())
    assert documented <= set(positions)


def object_schemas(node: Any, path: str = "#") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            found.append((path, node))
        for key, value in node.items():
            found.extend(object_schemas(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(object_schemas(value, f"{path}/{index}"))
    return found


def test_schema_closes_every_object() -> None:
    schema = json.loads(SCHEMA.read_text())
    objects = object_schemas(schema)
    assert len(objects) > 30
    for path, node in objects:
        if path.startswith("#/if") or path.startswith("#/then"):
            continue  # conditional constraints, not object declarations
        closed = node.get("additionalProperties")
        assert closed is False or isinstance(closed, dict), \
            f"{path}: additionalProperties must be false (or a schema, for string maps)"
        if isinstance(closed, dict):
            assert "properties" not in node, f"{path}: a map with named properties"


def test_schema_accepts_the_defaults_and_every_matrix_case() -> None:
    with load() as chart:
        chart.validate_schema({})
        for values in MATRIX.values():
            chart.validate_schema(values)


BAD_VALUES = {
    "unknown top-level key": ({"replicas": 2}, "replicas"),
    "unknown nested key": ({"metrics": {"serviceMonitor": {"enable": True}}}, "enable"),
    "zero replicas": ({"replicaCount": 0}, "replicaCount"),
    "replicas as text": ({"replicaCount": "2"}, "replicaCount"),
    "a shared priority for several replicas": (
        {"replicaCount": 2, "peering": {"priority": 10}}, "priority"),
    "no DSN secret": ({"database": {"existingSecret": ""}}, "existingSecret"),
    "a DSN given as a value": ({"database": {"dsn": "postgresql://u:p@h/db"}}, "dsn"),
    "an invalid namespace": ({"watch": {"namespaces": ["Shop_1"]}}, "namespaces"),
    "a namespace given as a string": ({"watch": {"namespaces": "shop"}}, "namespaces"),
    "the latest tag": ({"image": {"tag": "latest"}}, "tag"),
    "a malformed digest": ({"image": {"digest": "sha256:abc"}}, "digest"),
    "a bad pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    "root": ({"podSecurityContext": {"runAsUser": 0}}, "runAsUser"),
    "runAsNonRoot off": ({"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot"),
    "privilege escalation": ({"securityContext": {"allowPrivilegeEscalation": True}},
                             "allowPrivilegeEscalation"),
    "privileged": ({"securityContext": {"privileged": True}}, "privileged"),
    "an added capability": ({"securityContext": {"capabilities": {"drop": ["ALL"],
                                                                   "add": ["SYS_ADMIN"]}}},
                            "add"),
    "capabilities kept": ({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}, "drop"),
    "unconfined seccomp": ({"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
                           "seccompProfile"),
    "a port out of range": ({"operator": {"healthPort": 70000}}, "healthPort"),
    "a bad scrape interval": ({"metrics": {"serviceMonitor": {"interval": "soon"}}},
                              "interval"),
    "a bad Postgres schema name": ({"database": {"schema": "Bad-Name"}}, "schema"),
    "a status interval of zero": ({"operator": {"statusIntervalSeconds": 0}},
                                  "statusIntervalSeconds"),
    "a non-string label": ({"podLabels": {"team": 1}}, "team"),
    "a bad toleration operator": ({"tolerations": [{"key": "a", "operator": "Maybe"}]},
                                  "operator"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_schema_rejects_bad_values(case: str) -> None:
    values, field = BAD_VALUES[case]
    with load() as chart, pytest.raises(helm_python.HelmValuesError) as caught:
        chart.validate_schema(values)
    assert field in str(caught.value)
    # rendering refuses them too, before any template runs
    with load() as chart, pytest.raises(helm_python.HelmError):
        chart.render(values=values, name="claimsched", namespace="claimsched-system")
