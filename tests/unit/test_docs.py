"""The README documents every setting and starts with the two set-up commands."""

from __future__ import annotations

from pathlib import Path

from claimsched.settings import AgentSettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_starts_with_the_demo_and_test_commands() -> None:
    commands = [line for line in README.split("```")[1].splitlines()[1:] if line.strip()]
    assert [c.split()[0] for c in commands] == ["./scripts/demo", "./scripts/test"]


def test_every_agent_setting_is_in_the_readme_with_its_environment_name() -> None:
    for name, field in AgentSettings.fields.items():
        env = field.alias or f"CLAIMSCHED_{name.upper()}"
        assert f"`{env}`" in README, env
        assert field.description, name
