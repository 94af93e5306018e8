"""Prometheus metrics of the operator, in their own registry, served on the metrics port.

Per ClaimSchedule, the gauges the Helm chart's PrometheusRule alerts on and its Grafana
dashboard shows (labels `namespace`, `claimschedule` and `job_name`, as the chart's README
documents them): claimsched_operator_missed_runs, claimsched_operator_failed_runs,
claimsched_operator_orphaned_runs, claimsched_operator_schedules_without_agents,
claimsched_operator_late, claimsched_operator_consecutive_failures,
claimsched_operator_failing and claimsched_operator_last_success_timestamp_seconds."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from claimsched.schedule.deadlines import DEFAULT_GRACE

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

SCHEDULE_LABELS = ["namespace", "claimschedule", "job_name"]
MISSED_RUNS = Gauge(
    "claimsched_operator_missed_runs",
    "Occurrences in the last 24 hours that never ran (status.missedRuns.last24h), per "
    "ClaimSchedule.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
FAILED_RUNS = Gauge(
    "claimsched_operator_failed_runs",
    "Runs in the last 24 hours that ended failed (status.failedRuns.last24h), per ClaimSchedule.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
ORPHANED_RUNS = Gauge(
    "claimsched_operator_orphaned_runs",
    "Orphaned runs not reclaimed yet (status.orphanedRuns.current), per ClaimSchedule.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
WITHOUT_AGENTS = Gauge(
    "claimsched_operator_schedules_without_agents",
    "1 while the ClaimSchedule is enabled and no live agent has a handler for its job, else 0.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
LATE = Gauge(
    "claimsched_operator_late",
    f"1 while an occurrence past its grace (spec.startingDeadlineSeconds, else {DEFAULT_GRACE}) "
    "has no run, nor any later one (status.late), else 0.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
CONSECUTIVE_FAILURES = Gauge(
    "claimsched_operator_consecutive_failures",
    "Finished runs in a row, the latest first, that failed (status.consecutiveFailures).",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
FAILING = Gauge(
    "claimsched_operator_failing",
    "1 from spec.failureThreshold failed runs in a row until spec.recoveryThreshold "
    "successful ones (status.failing), else 0.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
LAST_SUCCESS = Gauge(
    "claimsched_operator_last_success_timestamp_seconds",
    "Fire time of the latest successful run (status.lastSuccessfulTime), Unix seconds; absent "
    "until one succeeded. Time since: time() - this.",
    SCHEDULE_LABELS,
    registry=REGISTRY,
)
_PER_SCHEDULE = (MISSED_RUNS, FAILED_RUNS, ORPHANED_RUNS, WITHOUT_AGENTS, LATE,
                 CONSECUTIVE_FAILURES, FAILING, LAST_SUCCESS)


@dataclass(frozen=True)
class ScheduleNumbers:
    """One ClaimSchedule's values of the per-schedule gauges."""

    missed_runs: int
    failed_runs: int
    orphaned_runs: int
    without_agents: bool
    late: bool
    consecutive_failures: int
    failing: bool
    last_success: datetime | None


class ScheduleSeries:
    """The per-schedule series: set from each refresh, removed when a schedule goes away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exported: set[tuple[str, str, str]] = set()

    def update(self, numbers: dict[tuple[str, str, str], ScheduleNumbers]) -> None:
        """Set the series of these (namespace, name, job) keys."""
        with self._lock:
            for key, n in numbers.items():
                MISSED_RUNS.labels(*key).set(n.missed_runs)
                FAILED_RUNS.labels(*key).set(n.failed_runs)
                ORPHANED_RUNS.labels(*key).set(n.orphaned_runs)
                WITHOUT_AGENTS.labels(*key).set(1 if n.without_agents else 0)
                LATE.labels(*key).set(1 if n.late else 0)
                CONSECUTIVE_FAILURES.labels(*key).set(n.consecutive_failures)
                FAILING.labels(*key).set(1 if n.failing else 0)
                if n.last_success is not None:
                    LAST_SUCCESS.labels(*key).set(n.last_success.timestamp())
                else:
                    with contextlib.suppress(KeyError):
                        LAST_SUCCESS.remove(*key)
                self._exported.add(key)

    def keep_only(self, keys: set[tuple[str, str, str]]) -> None:
        """Remove the series of every key not in `keys` (deleted, invalid, renamed job)."""
        with self._lock:
            for key in self._exported - keys:
                for gauge in _PER_SCHEDULE:
                    with contextlib.suppress(KeyError):
                        gauge.remove(*key)
            self._exported &= keys


def serve(port: int) -> None:
    """Serve /metrics on this port from a daemon thread (0: do not serve)."""
    if port:
        start_http_server(port, registry=REGISTRY)
