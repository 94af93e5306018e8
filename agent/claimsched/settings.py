"""Agent settings: every field documented with its unit and default, readable from CLAIMSCHED_*."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class AgentSettings(BaseSettings):
    """How an agent connects and behaves. Environment: CLAIMSCHED_<FIELD> (upper case)."""

    model_config = SettingsConfigDict(
        env_prefix="CLAIMSCHED_", extra="ignore", populate_by_name=True
    )

    dsn: SecretStr | None = Field(
        None, description="PostgreSQL connection string (libpq URI or key=value). Required."
    )
    schema_name: str = Field(
        "claimsched",
        alias="CLAIMSCHED_SCHEMA",
        description="Postgres schema holding claimsched's tables. Default: claimsched.",
    )
    agent_id: str | None = Field(
        None, description="Unique id of this agent. Default: <hostname>-<pid>-<random>."
    )
    max_concurrency: int = Field(
        16, ge=1, le=1000, description="Runs this agent executes at once (slots). Default 16."
    )
    migrate: bool = Field(
        True, description="Apply pending migrations at start (needs DDL rights). Default true."
    )
    housekeeping_seconds: float = Field(
        30.0, gt=0, description="Presence refresh and reaper period, seconds. Default 30."
    )
    jitter_seconds: float = Field(
        0.02, ge=0, description="Random delay added to each wake-up, seconds. Default 0.02."
    )
    shutdown_grace_seconds: float = Field(
        20.0, ge=0, description="On SIGTERM, how long running handlers may finish. Default 20."
    )
    retry_backoff_seconds: float = Field(
        2.0, gt=0, description="First retry delay after a failure; doubles, max 300 s. Default 2."
    )
    misfire_grace_seconds: float = Field(
        10.0, ge=0, description="catchUpPolicy None: how late an occurrence may still start, s."
    )
    schedule_refresh_seconds: float = Field(
        300.0, gt=0, description="Re-read schedules at least this often (besides NOTIFY), s."
    )
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Serve Prometheus metrics on this port. Default off."
    )
    log_level: str = Field("INFO", description="Log level of the claimsched loggers.")

    @field_validator("schema_name")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        if not SCHEMA_NAME.match(value):
            raise ValueError(f"invalid schema name {value!r}: use lower-case letters, digits, _")
        return value
