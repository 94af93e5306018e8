"""The README starts with the two set-up commands and its links lead somewhere; the docs' agent
settings reference lists every setting. (tests/docs builds the whole site; the quick start is
run by tests/operator/test_readme_quickstart.py.)"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from claimsched.settings import AgentSettings

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
LINK = re.compile(r"\]\(([^)\s]+)\)")


def gen_reference(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """docs/gen_reference.py, the docs build's hook, imported as a module."""
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" /
                                                  "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gen_reference", module)
    spec.loader.exec_module(module)
    return module


def test_the_readme_starts_with_the_demo_and_test_commands() -> None:
    commands = [line for line in README.split("```")[1].splitlines()[1:] if line.strip()]
    assert [c.split()[0] for c in commands] == ["./scripts/demo", "./scripts/test"]


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    targets = [t for t in LINK.findall(README) if "://" not in t and not t.startswith("#")]
    assert targets, "the README links into the docs"
    missing = [t for t in targets if not (REPO / t.split("#")[0]).exists()]
    assert not missing, missing


def test_every_agent_setting_is_in_the_settings_reference_with_its_environment_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    page = (REPO / "docs" / "pages" / "reference" / "agent-settings.md").read_text()
    assert "<!-- reference: agent-settings -->" in page
    generated = gen_reference(monkeypatch).agent_settings()
    for name, field in AgentSettings.fields.items():
        env = field.alias or f"CLAIMSCHED_{name.upper()}"
        assert f"`{env}`" in generated, env
        assert field.description, name
