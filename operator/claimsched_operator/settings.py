"""Operator settings: every field documented with its unit and default, read from CLAIMSCHED_*."""

from __future__ import annotations

import hashlib
import os

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from claimsched.settings import schema_name

PRIORITY_RANGE = 1_000_000
# How long kopf waits to run a handler again after a database or Kubernetes API error, seconds.
RETRY_DELAY_SECONDS = 5.0


def derived_priority(pod_name: str | None) -> int:
    """A peering priority from the pod name, so that replicas of one Deployment differ."""
    if not pod_name:
        return 0
    digest = hashlib.sha256(pod_name.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % (PRIORITY_RANGE - 1)


class OperatorSettings(BaseSettings):
    """How the operator connects and behaves. Environment: CLAIMSCHED_<FIELD> (upper case)."""

    model_config = SettingsConfigDict(
        env_prefix="CLAIMSCHED_", extra="ignore", populate_by_name=True
    )

    dsn: SecretStr | None = Field(
        None,
        description="Default database (libpq URI or key=value) for ClaimSchedules without "
        "spec.databaseRef. Default: none (such resources get Synced=False).",
    )
    schema_name: str = Field(
        "claimsched",
        alias="CLAIMSCHED_SCHEMA",
        description="Postgres schema holding claimsched's tables, in every database. "
        "Default: claimsched.",
    )
    namespaces: str = Field(
        "",
        alias="CLAIMSCHED_OPERATOR_NAMESPACES",
        description="Comma-separated namespaces to watch (exact names). Default: empty = all "
        "namespaces.",
    )
    status_interval_seconds: float = Field(
        15.0,
        gt=0,
        alias="CLAIMSCHED_OPERATOR_STATUS_INTERVAL_SECONDS",
        description="How often statuses are refreshed from the database, seconds. Default 15.",
    )
    health_port: int = Field(
        8081,
        ge=0,
        le=65535,
        alias="CLAIMSCHED_OPERATOR_HEALTH_PORT",
        description="Port of GET /healthz (liveness) and GET /readyz (readiness: the default "
        "database answers). 0 disables. Default 8081 (8080 is `claimsched web`'s).",
    )
    metrics_port: int = Field(
        9090,
        ge=0,
        le=65535,
        alias="CLAIMSCHED_OPERATOR_METRICS_PORT",
        description="Port of GET /metrics (Prometheus text format). 0 disables. Default 9090.",
    )
    peering: str = Field(
        "",
        alias="CLAIMSCHED_OPERATOR_PEERING",
        description="kopf peering name shared by the operator's replicas. Default: empty = "
        "standalone (one replica).",
    )
    priority: int | None = Field(
        None,
        alias="CLAIMSCHED_OPERATOR_PRIORITY",
        description="Peering priority (integer; the highest replica works, the others pause). "
        "Default: derived from a hash of POD_NAME, so replicas differ.",
    )
    peering_lifetime_seconds: int = Field(
        60,
        ge=1,
        le=3600,
        alias="CLAIMSCHED_OPERATOR_PEERING_LIFETIME_SECONDS",
        description="How long a replica's peering record counts as alive without a keep-alive, "
        "seconds (kopf's peering lifetime): a paused replica takes over this long after the "
        "active one died. Keep-alives go out 5-10 s before it expires (every second when it is "
        "under 11). Default 60.",
    )
    database_refs: bool = Field(
        False,
        alias="CLAIMSCHED_OPERATOR_DATABASE_REFS",
        description="Whether spec.databaseRef may be used (the operator then reads those "
        "Secrets). Default false.",
    )
    retention_days: int = Field(
        90,
        ge=1,
        le=3650,
        alias="CLAIMSCHED_OPERATOR_RETENTION_DAYS",
        description="Run history kept by maintenance, days (older partitions are dropped). "
        "Default 90.",
    )
    maintenance_interval_seconds: float = Field(
        3600.0,
        gt=0,
        alias="CLAIMSCHED_OPERATOR_MAINTENANCE_INTERVAL_SECONDS",
        description="How often maintenance (partitions, retention) runs per database, seconds. "
        "Default 3600.",
    )
    pod_name: str | None = Field(
        None,
        alias="POD_NAME",
        description="This pod's name (downward API): the default priority and Event source.",
    )
    pod_namespace: str | None = Field(
        None,
        alias="POD_NAMESPACE",
        description="This pod's namespace (downward API): where namespaced peering lives.",
    )

    @field_validator("schema_name")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        return schema_name(value)

    @property
    def namespace_list(self) -> list[str]:
        return [ns.strip() for ns in self.namespaces.split(",") if ns.strip()]

    @property
    def effective_priority(self) -> int:
        if self.priority is not None:
            return self.priority
        return derived_priority(self.pod_name or os.environ.get("HOSTNAME"))

    @property
    def default_dsn(self) -> str | None:
        return self.dsn.get_secret_value() if self.dsn else None


def status_interval_seconds() -> float:
    """The status interval as the timers are registered (handlers.py, on import: before the
    settings are read whole). An invalid value gives the default here; the operator's start
    then reports it, as it reports any invalid setting."""
    info = OperatorSettings.model_fields["status_interval_seconds"]
    default = float(info.default)
    try:
        value = float(os.environ.get(info.alias or "", default))
    except ValueError:
        return default
    return value if value > 0 else default
