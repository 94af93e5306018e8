"""Prometheus metrics of the operator, in their own registry, served on the metrics port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry(auto_describe=True)

REFRESH_SECONDS = Histogram(
    "claimsched_operator_status_refresh_seconds",
    "Duration of one status refresh of one database (the aggregate query and the per-job "
    "computation), seconds.",
    ["database"],
    registry=REGISTRY,
)
REFRESH_STATEMENTS = Gauge(
    "claimsched_operator_status_refresh_statements",
    "SQL statements sent by the last status refresh of a database (1 when healthy).",
    ["database"],
    registry=REGISTRY,
)
SCHEDULES_SYNCED = Counter(
    "claimsched_operator_schedules_synced_total",
    "ClaimSchedules written to job_schedule, by outcome (created, updated, unchanged).",
    ["outcome"],
    registry=REGISTRY,
)
INVALID_SPECS = Counter(
    "claimsched_operator_invalid_specs_total",
    "ClaimSchedules rejected as invalid, by reason.",
    ["reason"],
    registry=REGISTRY,
)
MANAGED_SCHEDULES = Gauge(
    "claimsched_operator_schedules",
    "ClaimSchedules the operator serves, by database.",
    ["database"],
    registry=REGISTRY,
)


def serve(port: int) -> None:
    """Serve /metrics on this port from a daemon thread (0: do not serve)."""
    if port:
        start_http_server(port, registry=REGISTRY)
