"""Agent settings: read from CLAIMSCHED_*, checked against their bounds, the DSN never shown."""

from __future__ import annotations

import os
import re

import pytest

from claimsched import AgentSettings, ConfigurationError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.upper().startswith("CLAIMSCHED_"):
            monkeypatch.delenv(name)


def test_settings_without_environment_are_the_documented_defaults() -> None:
    settings = AgentSettings()
    for name, field in AgentSettings.fields.items():
        assert getattr(settings, name) == field.default, name


def test_the_environment_is_parsed_and_keyword_arguments_win_over_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAIMSCHED_MAX_CONCURRENCY", " 4 ")
    monkeypatch.setenv("CLAIMSCHED_MIGRATE", "no")
    monkeypatch.setenv("CLAIMSCHED_JITTER_SECONDS", "0.5")
    monkeypatch.setenv("CLAIMSCHED_SCHEMA", "tenant_7")
    monkeypatch.setenv("claimsched_log_level", "DEBUG")
    monkeypatch.setenv("CLAIMSCHED_OPERATOR_NAMESPACE", "not ours, ignored")
    settings = AgentSettings(jitter_seconds=1)
    assert settings.max_concurrency == 4
    assert settings.migrate is False
    assert settings.jitter_seconds == 1.0
    assert settings.schema_name == "tenant_7"
    assert settings.log_level == "DEBUG"
    assert AgentSettings(CLAIMSCHED_SCHEMA="other").schema_name == "other"


@pytest.mark.parametrize(("text", "value"), [("true", True), ("1", True), ("Yes", True),
                                             ("false", False), ("0", False), ("off", False)])
def test_a_boolean_setting_reads_the_usual_spellings(
    monkeypatch: pytest.MonkeyPatch, text: str, value: bool
) -> None:
    monkeypatch.setenv("CLAIMSCHED_MIGRATE", text)
    assert AgentSettings().migrate is value


def test_every_bad_setting_is_named_in_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMSCHED_METRICS_PORT", "http")
    with pytest.raises(ConfigurationError) as caught:
        AgentSettings(max_concurrency=True, housekeeping_seconds=0, schema_name="")
    assert str(caught.value) == (
        "schema_name: invalid schema name '': it is empty; "
        "max_concurrency: expected an integer, got True; "
        "housekeeping_seconds: must be more than 0, got 0.0; "
        "metrics_port: expected an integer, got 'http'"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_concurrency": 1001}, "max_concurrency: must be at most 1000"),
        ({"metrics_port": -1}, "metrics_port: must be at least 0"),
        ({"retry_backoff_seconds": float("nan")}, "retry_backoff_seconds: must be a finite"),
        ({"migrate": "maybe"}, "migrate: expected true or false"),
        ({"log_level": None}, "log_level: is required"),
        ({"max_concurency": 4}, "unknown setting(s): max_concurency"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        AgentSettings(**fields)


def test_the_dsn_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMSCHED_DSN", "postgresql://app:hunter2@db/app")
    settings = AgentSettings()
    assert settings.dsn is not None
    assert settings.dsn.get_secret_value() == "postgresql://app:hunter2@db/app"
    shown = repr(settings) + str(settings) + repr(settings.as_dict()) + f"{settings.dsn}"
    assert "hunter2" not in shown


def test_settings_survive_a_round_trip_through_as_dict() -> None:
    settings = AgentSettings(dsn="host=db", max_concurrency=3, metrics_port=0)
    assert AgentSettings(**settings.as_dict()) == settings
