"""The reference pages, generated from the code at every docs build (an MkDocs hook).

A page asks for a generated part with a marker line, `<!-- reference: NAME -->`; the hook puts
the markdown that `REFERENCES[NAME]` returns in its place. The sources are the code itself:

- `cli`, `operator-cli`: every command's argparse help (`claimsched.cli.parser()`,
  `claimsched_operator.main.parser()`), exactly as `--help` prints it;
- `crd-spec`, `crd-status`, `crd-rules`, `crd-columns`: the fields of `crds/claimschedule.yaml`'s
  openAPIV3Schema (type, default, bounds, description), its CEL rules and printer columns;
- `agent-settings`: `AgentSettings.fields` (environment name, type, default, bounds, description);
- `operator-settings`: `OperatorSettings.model_fields`;
- `python-api`: the names `claimsched.__all__` exports, with their signatures and docstrings;
- `chart`: the Helm chart's own README (`charts/claimsched/README.md`).

An unknown marker name fails the build.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CRD = REPO / "crds" / "claimschedule.yaml"
CHART_README = REPO / "charts" / "claimsched" / "README.md"
MARKER = re.compile(r"^<!-- reference: ([a-z-]+) -->$", re.MULTILINE)
HELP_COLUMNS = "100"  # argparse wraps --help to $COLUMNS: the same page on every machine

Json = dict[str, Any]


class ReferenceError(Exception):
    """A page names a generated part that does not exist."""


# -- markdown helpers ---------------------------------------------------------------------------


def text(value: str) -> str:
    """`value` for a table cell: one line; outside code spans `<`, `>` and `|` are escaped (so
    `<hostname>` is text, not an HTML tag); code spans stay as they are."""
    parts = escaped(" ".join(value.split())).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = parts[i].replace("|", "\\|")
    return "`".join(parts)


def code(value: object) -> str:
    """`value` as a code span (one that holds a backtick gets a longer fence)."""
    shown = str(value)
    fence = "``" if "`" in shown else "`"
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def fenced(body: str, language: str = "text") -> str:
    return f"```{language}\n{body.rstrip()}\n```"


# -- CLI ----------------------------------------------------------------------------------------


@contextmanager
def help_width() -> Iterator[None]:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of `parser`, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli() -> str:
    from claimsched.cli import parser

    with help_width():
        top = parser()
        parts = [f"## `claimsched`\n\n{fenced(top.format_help())}"]
        for name, command in subcommands(top).items():
            parts.append(f"### `claimsched {name}`\n\n{fenced(command.format_help())}")
    return "\n\n".join(parts)


def operator_cli() -> str:
    from claimsched_operator.main import parser

    with help_width():
        return f"## `claimsched-operator`\n\n{fenced(parser().format_help())}"


# -- the CRD ------------------------------------------------------------------------------------


@functools.cache
def crd_version() -> Json:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc: Json = yaml.load(CRD.read_text(), Loader=loader)
    (version,) = [v for v in doc["spec"]["versions"] if v.get("storage")]
    return dict(version)


def crd_schema(part: str) -> Json:
    schema: Json = crd_version()["schema"]["openAPIV3Schema"]["properties"][part]
    return schema


def schema_type(schema: Json) -> str:
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"array of {schema_type(schema.get('items', {}))}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return kind


def bounds(schema: Json) -> str:
    """Enum, numeric and length bounds, pattern and list semantics, as short phrases."""
    said = []
    if "enum" in schema:
        said.append("one of " + ", ".join(code(v) for v in schema["enum"]))
    for key, word in (("minimum", "≥"), ("maximum", "≤")):
        if key in schema:
            said.append(f"{word} {schema[key]}")
    for key, word in (("minLength", "length ≥"), ("maxLength", "length ≤"),
                      ("maxItems", "items ≤")):
        if key in schema:
            said.append(f"{word} {schema[key]}")
    if "pattern" in schema:
        said.append(f"pattern {code(schema['pattern'])}")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = ", ".join(schema.get("x-kubernetes-list-map-keys", []))
        said.append(f"list-map keyed by {code(keys)}")
    return "; ".join(said)


def fields(schema: Json, prefix: str) -> Iterator[tuple[str, Json, bool]]:
    """(dotted path, schema, required) of every field under `schema`, depth first."""
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}"
        yield path, sub, name in required
        yield from fields(sub, path)
        if sub.get("type") == "array":
            yield from fields(sub.get("items", {}), f"{path}[]")


def crd_fields(part: str) -> str:
    rows = []
    for path, schema, required in fields(crd_schema(part), part):
        default = code(yaml.safe_dump(schema["default"], default_flow_style=True).strip()
                       .removesuffix("...").strip()) if "default" in schema else ""
        rows.append([
            code(path) + (" (required)" if required else ""),
            text(schema_type(schema)),
            default,
            bounds(schema),
            text(schema.get("description", "")),
        ])
    return table(["Field", "Type", "Default", "Bounds", "Description"], rows)


def crd_rules() -> str:
    rows = []
    for path, schema, _ in [("spec", crd_schema("spec"), True), *fields(crd_schema("spec"),
                                                                          "spec")]:
        for rule in schema.get("x-kubernetes-validations", []):
            where = path + rule.get("fieldPath", "")
            rows.append([code(where), code(" ".join(rule["rule"].split())),
                         text(rule.get("message", ""))])
    return table(["Field", "Rule (CEL)", "Message"], rows)


def crd_columns() -> str:
    rows = [[text(c["name"]), text(c["type"]), code(c["jsonPath"]),
             "`-o wide`" if c.get("priority", 0) else "always", text(c.get("description", ""))]
            for c in crd_version()["additionalPrinterColumns"]]
    return table(["Column", "Type", "JSONPath", "Shown", "Description"], rows)


# -- settings -----------------------------------------------------------------------------------


def agent_settings() -> str:
    from claimsched.settings import AgentSettings

    rows = []
    for name, setting in AgentSettings.fields.items():
        limits = [f"{word} {value:g}" for word, value in
                  (("≥", setting.ge), (">", setting.gt), ("≤", setting.le)) if value is not None]
        rows.append([
            code(setting.alias or f"CLAIMSCHED_{name.upper()}"),
            code(name),
            text(setting.kind.__name__),
            "" if setting.default is None else code(setting.default),
            "; ".join(limits),
            text(setting.description),
        ])
    return table(["Environment", "`Agent(...)` argument", "Type", "Default", "Bounds",
                  "Description"], rows)


def operator_settings() -> str:
    from claimsched_operator.settings import OperatorSettings

    rows = []
    for name, info in OperatorSettings.model_fields.items():
        limits = []
        for item in info.metadata:
            for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
                if getattr(item, attr, None) is not None:
                    limits.append(f"{word} {getattr(item, attr)}")
        default = info.get_default()
        rows.append([
            code(info.alias or f"CLAIMSCHED_{name.upper()}"),
            text(str(info.annotation).replace("typing.", "").replace("pydantic.types.", "")
                 .replace("<class '", "").replace("'>", "")),
            "" if default in (None, "") else code(default),
            "; ".join(limits),
            text(info.description or ""),
        ])
    return table(["Environment", "Type", "Default", "Bounds", "Description"], rows)


# -- the Python API -----------------------------------------------------------------------------


def escaped(value: str) -> str:
    """`value` as markdown prose: `<` and `>` outside code spans are text, not HTML tags."""
    parts = value.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def docstring(obj: object) -> str:
    return escaped(inspect.cleandoc(obj.__doc__ or "").strip())


def signature(obj: Callable[..., Any], name: str) -> str:
    """`name(parameters) -> result`, the annotations as the code writes them (unquoted)."""
    try:
        return f"{name}{inspect.signature(obj)}".replace("'", "")
    except (TypeError, ValueError):
        return name


def python_api() -> str:
    import claimsched

    parts = []
    for name in claimsched.__all__:
        obj = getattr(claimsched, name)
        if name.startswith("_"):
            continue
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            bases = ", ".join(base.__name__ for base in obj.__bases__)
            parts.append(f"### `{name}`\n\nException ({bases}). {docstring(obj)}")
            continue
        title = signature(obj, name).removesuffix(" -> None") if callable(obj) else name
        parts.append(f"### `{name}`\n\n{fenced(title, 'python')}\n\n{docstring(obj)}")
        if not inspect.isclass(obj):
            continue
        for member, value in vars(obj).items():
            if member.startswith("_") or not (docstring(value) or callable(value)):
                continue
            if isinstance(value, property):
                head = f"{name}.{member}  # property"
            elif callable(value):
                head = signature(value, f"{name}.{member}").replace("(self, ", "(").replace(
                    "(self)", "()")
            else:
                continue
            parts.append(f"#### `{name}.{member}`\n\n{fenced(head, 'python')}\n\n"
                         f"{docstring(value)}")
    return "\n\n".join(parts)


# -- the chart ----------------------------------------------------------------------------------


def chart() -> str:
    """The chart's README below its title, its headings one level down."""
    body = CHART_README.read_text().split("\n", 1)[1]
    return re.sub(r"^(#+) ", r"#\1 ", body, flags=re.MULTILINE)


REFERENCES: dict[str, Callable[[], str]] = {
    "cli": cli,
    "operator-cli": operator_cli,
    "crd-spec": lambda: crd_fields("spec"),
    "crd-status": lambda: crd_fields("status"),
    "crd-rules": crd_rules,
    "crd-columns": crd_columns,
    "agent-settings": agent_settings,
    "operator-settings": operator_settings,
    "python-api": python_api,
    "chart": chart,
}


def expand(markdown: str) -> str:
    """`markdown` with every reference marker replaced by its generated part."""

    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in REFERENCES:
            raise ReferenceError(f"unknown reference {name!r}; known: {sorted(REFERENCES)}")
        return REFERENCES[name]()

    return MARKER.sub(generated, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: expand the page's reference markers."""
    return expand(markdown)
