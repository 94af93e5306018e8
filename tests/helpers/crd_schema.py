"""Validate custom resources against a CRD's openAPIV3Schema, as the API server would.

The API server prunes unknown fields, applies defaults, validates the OpenAPI schema and then
evaluates the CEL rules in ``x-kubernetes-validations``. This module does the same in-process,
with one deliberate difference: an unknown field is an error here, not silently pruned, so that
the tests catch fields the operator or an example would lose on a real cluster.

    crd = load_crd("crds/claimschedule.yaml")
    crd.structural_errors()          # [] when the schema is structural
    defaulted = crd.validate(obj)    # or crd.validate(new, old=previous) for updates

CEL is evaluated with the core language only (PyPI ``common-expression-language``); the
Kubernetes extension libraries (``isSorted``, ``quantity``, regex ``find`` ...) do not exist here.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cel
import jsonschema
import yaml

Json = dict[str, Any]

# Keywords the API server rejects anywhere in a structural v1 schema.
_FORBIDDEN = (
    "$ref",
    "$schema",
    "definitions",
    "dependencies",
    "id",
    "patternProperties",
    "additionalItems",
)
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_NOT_IN_JUNCTORS = ("type", "default", "description", "nullable", "additionalProperties")
_SCALARS = ("string", "integer", "number", "boolean")
_COPIED = (
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "required",
    "format",
)
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_formats = jsonschema.FormatChecker()


@_formats.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _DATE_TIME.match(value):
        return False
    datetime.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    return True


@_formats.checks("date", raises=ValueError)
def _is_date(value: object) -> bool:
    return not isinstance(value, str) or bool(datetime.date.fromisoformat(value))


@_formats.checks("int32")
def _is_int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_formats.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


class CrdValidationError(Exception):
    """The object is invalid; ``errors`` lists every failure as ``(path, message)``."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {message}" for path, message in errors))

    @property
    def messages(self) -> list[str]:
        return [message for _, message in self.errors]


@dataclass
class Crd:
    """One CustomResourceDefinition; validates objects of its storage version."""

    doc: Json
    _validators: dict[str, jsonschema.Draft202012Validator] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return str(self.doc["spec"]["group"])

    @property
    def names(self) -> Json:
        return dict(self.doc["spec"]["names"])

    @property
    def kind(self) -> str:
        return str(self.names["kind"])

    @property
    def plural(self) -> str:
        return str(self.names["plural"])

    @property
    def namespaced(self) -> bool:
        return bool(self.doc["spec"]["scope"] == "Namespaced")

    def version(self, name: str | None = None) -> Json:
        """The named version, or the storage version."""
        for version in self.doc["spec"]["versions"]:
            if version["name"] == name or (name is None and version.get("storage")):
                return dict(version)
        raise KeyError(f"{self.group} has no version {name!r}")

    def schema(self, version: str | None = None) -> Json:
        return dict(self.version(version)["schema"]["openAPIV3Schema"])

    def validate(self, obj: Json, old: Json | None = None) -> Json:
        """Return ``obj`` with defaults applied, or raise CrdValidationError with all failures.

        With ``old``, CEL transition rules (those using ``oldSelf``) are evaluated too.
        """
        version = str(obj.get("apiVersion", "")).partition("/")[2]
        errors: list[tuple[str, str]] = []
        if obj.get("apiVersion") != f"{self.group}/{version}" or obj.get("kind") != self.kind:
            errors.append(("", f"apiVersion/kind must be {self.group}/<version> {self.kind}"))
            raise CrdValidationError(errors)
        try:
            schema = self.schema(version)
        except KeyError as e:
            raise CrdValidationError([("apiVersion", str(e))]) from None
        result = copy.deepcopy(obj)
        apply_defaults(schema, result)
        name = (result.get("metadata") or {}).get("name")
        if name is not None and not (isinstance(name, str) and _DNS_SUBDOMAIN.match(name)):
            errors.append(
                (
                    "metadata.name",
                    "a lowercase RFC 1123 subdomain must consist of "
                    "lower case alphanumeric characters, '-' or '.'",
                )
            )
        if version not in self._validators:
            self._validators[version] = jsonschema.Draft202012Validator(
                to_json_schema(schema, root=True), format_checker=_formats
            )
        for error in self._validators[version].iter_errors(result):
            errors.append((_dotted(error.absolute_path), error.message))
        old_defaulted = copy.deepcopy(old) if old is not None else None
        if old_defaulted is not None:
            apply_defaults(schema, old_defaulted)
        errors.extend(_walk_rules(schema, result, old_defaulted, "", quiet=bool(errors)))
        if errors:
            raise CrdValidationError(errors)
        return result

    def structural_errors(self) -> list[str]:
        """What apiextensions would reject in the schemas of this CRD (empty if structural)."""
        errors: list[str] = []
        for version in self.doc["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            if schema.get("type") != "object":
                errors.append(f"{version['name']}: the root must be of type object")
            errors.extend(_structural(schema, version["name"], root=True))
        return errors


def load_crd(path: str | Path) -> Crd:
    docs = [doc for doc in yaml.safe_load_all(Path(path).read_text()) if doc]
    crds = [doc for doc in docs if doc.get("kind") == "CustomResourceDefinition"]
    if len(crds) != 1:
        raise ValueError(f"{path}: expected one CustomResourceDefinition, found {len(crds)}")
    return Crd(crds[0])


def to_json_schema(node: Json, *, root: bool = False, junctor: bool = False) -> Json:
    """Convert one structural OpenAPI v3 node to JSON Schema 2020-12 (unknown fields banned)."""
    out: Json = {key: node[key] for key in _COPIED if key in node}
    nullable = bool(node.get("nullable"))
    if "type" in node:
        out["type"] = [node["type"], "null"] if nullable else node["type"]
    if nullable and "enum" in out:
        out["enum"] = [*out["enum"], None]
    for bound in ("Minimum", "Maximum"):  # OpenAPI 3.0 booleans -> 2020-12 numbers
        if node.get(f"exclusive{bound}") and bound.lower() in out:
            out[f"exclusive{bound}"] = out.pop(bound.lower())
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    properties = {name: to_json_schema(sub) for name, sub in node.get("properties", {}).items()}
    if root or node.get("x-kubernetes-embedded-resource"):
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        properties["metadata"] = {"type": "object"}
    if properties:
        out["properties"] = properties
    if "items" in node:
        out["items"] = to_json_schema(node["items"])
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = to_json_schema(extra)
    elif (
        not junctor
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and (extra is not True and (properties or node.get("type") == "object"))
    ):
        out["additionalProperties"] = False
    for name in _JUNCTORS:
        if name == "not" and name in node:
            out["not"] = to_json_schema(node["not"], junctor=True)
        elif name in node:
            out.setdefault("allOf", []).append(
                {name: [to_json_schema(sub, junctor=True) for sub in node[name]]}
            )
    return out


def apply_defaults(node: Json, value: Any) -> None:
    """Fill defaults in place, recursively, wherever the parent object exists.

    Like the API server, nulls in non-nullable fields are dropped first, so that they get the
    default (or are absent) instead of failing validation.
    """
    if isinstance(value, dict):
        for name, sub in node.get("properties", {}).items():
            if name in value and value[name] is None and not sub.get("nullable"):
                del value[name]
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                apply_defaults(sub, value[name])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                apply_defaults(extra, item)
    elif isinstance(value, list) and "items" in node:
        for item in value:
            apply_defaults(node["items"], item)


def _walk_rules(
    node: Json, value: Any, old: Any, path: str, *, quiet: bool
) -> Iterator[tuple[str, str]]:
    """List-map key uniqueness and CEL rules, depth first, with oldSelf correlated by key."""
    if value is None:
        return
    for rule in node.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"] and old is None:
            continue  # transition rules only run on updates that had a value here
        where = (path + str(rule.get("fieldPath", ""))).lstrip(".")
        try:
            ok = cel.evaluate(rule["rule"], {"self": value, "oldSelf": old})
        except Exception as e:  # a CEL type/field error: the API server reports it too
            if not quiet:
                yield where, f"error evaluating rule {rule['rule']!r}: {e}"
            continue
        if ok is not True:
            yield where, str(rule.get("message") or f"failed rule: {rule['rule']}")
    if isinstance(value, dict):
        for name, sub in node.get("properties", {}).items():
            if name in value:
                sub_old = old.get(name) if isinstance(old, dict) else None
                yield from _walk_rules(
                    sub, value[name], sub_old, f"{path}.{name}".lstrip("."), quiet=quiet
                )
    elif isinstance(value, list) and "items" in node:
        keys = node.get("x-kubernetes-list-map-keys") or []
        olds: dict[tuple[Any, ...], Any] = {}
        if node.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
            olds = {_key(item, keys): item for item in old if isinstance(item, dict)}
        seen: set[tuple[Any, ...]] = set()
        for index, item in enumerate(value):
            if node.get("x-kubernetes-list-type") == "map" and isinstance(item, dict):
                key = _key(item, keys)
                if key in seen:
                    duplicate = dict(zip(keys, key, strict=True))
                    yield f"{path}[{index}]", f"Duplicate value: {duplicate}"
                seen.add(key)
                yield from _walk_rules(
                    node["items"], item, olds.get(key), f"{path}[{index}]", quiet=quiet
                )
            else:
                yield from _walk_rules(node["items"], item, None, f"{path}[{index}]", quiet=quiet)


def _key(item: Json, keys: list[str]) -> tuple[Any, ...]:
    return tuple(item.get(key) for key in keys)


def _structural(
    node: Any, path: str, *, root: bool = False, junctor: bool = False
) -> Iterator[str]:
    if not isinstance(node, dict):
        yield f"{path}: must be an object"
        return
    for key in _FORBIDDEN:
        if key in node:
            yield f"{path}: {key} is forbidden in structural schemas"
    if junctor:
        for key in _NOT_IN_JUNCTORS:
            if key in node:
                yield f"{path}: {key} must not be set inside allOf/anyOf/oneOf/not"
    kind = node.get("type")
    special = node.get("x-kubernetes-int-or-string") or node.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if not junctor and not kind and not special:
        yield f"{path}: type must not be empty"
    if node.get("x-kubernetes-int-or-string") and kind:
        yield f"{path}: x-kubernetes-int-or-string must not have a type"
    if node.get("uniqueItems"):
        yield f"{path}: uniqueItems cannot be true (use x-kubernetes-list-type: set)"
    extra = node.get("additionalProperties")
    if extra is False:
        yield f"{path}: additionalProperties cannot be false"
    if extra is not None and "properties" in node:
        yield f"{path}: additionalProperties and properties are mutually exclusive"
    if (
        kind == "object"
        and not junctor
        and "properties" not in node
        and extra is None
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and not (path.endswith(".metadata") and path.count(".") == 1)
    ):
        yield (
            f"{path}: an object needs properties, additionalProperties or "
            "x-kubernetes-preserve-unknown-fields"
        )
    if kind == "array" and "items" not in node:
        yield f"{path}: an array must have items"
    for name in node.get("required", []):
        if name not in node.get("properties", {}) and not junctor:
            yield f"{path}: required property {name!r} is not declared"
    yield from _list_type_errors(node, path)
    if "default" in node:
        try:
            jsonschema.Draft202012Validator(to_json_schema(node), format_checker=_formats).validate(
                node["default"]
            )
        except jsonschema.ValidationError as e:
            yield f"{path}: the default is invalid: {e.message}"
    if root and "metadata" in node.get("properties", {}):
        meta = node["properties"]["metadata"]
        if set(meta) - {"type", "properties"} or set(meta.get("properties", {})) - {
            "name",
            "generateName",
        }:
            yield f"{path}.metadata: only type and name/generateName restrictions are allowed"
    for name, sub in node.get("properties", {}).items():
        yield from _structural(sub, f"{path}.{name}", junctor=junctor)
    if "items" in node:
        yield from _structural(node["items"], f"{path}[*]", junctor=junctor)
    if isinstance(extra, dict):
        yield from _structural(extra, f"{path}{{*}}", junctor=junctor)
    for name in _JUNCTORS:
        for index, sub in enumerate(
            node[name] if isinstance(node.get(name), list) else [node[name]] if name in node else []
        ):
            yield from _structural(sub, f"{path}.{name}[{index}]", junctor=True)
    for index, rule in enumerate(node.get("x-kubernetes-validations", [])):
        try:
            cel.compile(rule["rule"])
        except ValueError as e:
            yield f"{path}.x-kubernetes-validations[{index}]: {e}"
        if not rule.get("message") and not rule.get("messageExpression"):
            yield f"{path}.x-kubernetes-validations[{index}]: give the rule a message"


def _list_type_errors(node: Json, path: str) -> Iterator[str]:
    list_type = node.get("x-kubernetes-list-type")
    items = node.get("items", {})
    if list_type is None:
        if "x-kubernetes-list-map-keys" in node:
            yield f"{path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map"
        return
    if node.get("type") != "array":
        yield f"{path}: x-kubernetes-list-type is only for arrays"
    if list_type == "set" and items.get("type") not in _SCALARS:
        yield f"{path}: items of a list-type set must be scalars"
    if list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        if items.get("type") != "object" or not keys:
            yield f"{path}: a list-type map needs object items and x-kubernetes-list-map-keys"
        for key in keys:
            sub = items.get("properties", {}).get(key)
            if sub is None or sub.get("type") not in _SCALARS:
                yield f"{path}: map key {key!r} must be a declared scalar property"
            elif key not in items.get("required", []) and "default" not in sub:
                yield f"{path}: map key {key!r} must be required or have a default"
    elif list_type not in ("atomic", "set"):
        yield f"{path}: unknown x-kubernetes-list-type {list_type!r}"


def _dotted(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")
