"""The operator's shared state (kopf's memo) and its named background loops: status refresh (one
aggregate statement per database per interval) and maintenance."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from claimsched.errors import ClaimschedError

from . import metrics, observations
from .catalog import Catalog, Entry
from .databases import DEFAULT, Databases
from .health import HealthServer
from .history import SettledHistory
from .kubeapi import KubeApi
from .settings import OperatorSettings
from .writer import Written

log = logging.getLogger("claimsched.operator")


@dataclass
class Runtime:
    """Everything the handlers share."""

    config: OperatorSettings
    databases: Databases
    kube: KubeApi
    catalog: Catalog = field(default_factory=Catalog)
    written: Written = field(default_factory=Written)
    counter: observations.OccurrenceCounter = field(default_factory=observations.OccurrenceCounter)
    histories: dict[str, SettledHistory] = field(default_factory=dict)  # by database
    series: metrics.ScheduleSeries = field(default_factory=metrics.ScheduleSeries)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    health: HealthServer | None = None

    @classmethod
    def create(cls, config: OperatorSettings) -> Runtime:
        """Nothing opened yet: databases open on first use, the API session once logged in."""
        return cls(config, Databases(config.schema_name, config.default_dsn), KubeApi())

    # -- loops ---------------------------------------------------------------------------------

    def refresh_once(self) -> None:
        """Refresh every database's observations (blocking; runs in a worker thread)."""
        kept: set[tuple[str, str, str]] = set()
        by_database = self.catalog.by_database()
        for key, entries in by_database.items():
            kept.update(_series_key(e) for e in entries)
            database = self.databases.existing(key)
            if database is None:
                continue
            schedules = {e.job_name: e.schedule for e in entries if e.schedule is not None}
            previous = {e.job_name: seen for e in entries
                        if (seen := self.catalog.observation(e)) is not None}
            alerting = {e.job_name: (e.alerting, e.failing_before) for e in entries}
            started = time.monotonic()
            try:
                observed = observations.refresh(
                    database.owned, schedules, self.counter, self.config.retention_days,
                    previous, alerting, self.histories.setdefault(key, SettledHistory()),
                )
            except ClaimschedError as exc:
                log.warning("status refresh of database %s failed: %s", key, exc,
                            extra={"action": "refresh", "database": key})
                continue
            metrics.REFRESH_SECONDS.labels(key).observe(time.monotonic() - started)
            metrics.REFRESH_STATEMENTS.labels(key).set(1)
            metrics.MANAGED_SCHEDULES.labels(key).set(len(schedules))
            self.catalog.publish(key, observed)
            self.series.update({_series_key(e): _numbers(observed[e.job_name])
                                for e in entries if e.job_name in observed})
        self.series.keep_only(kept)
        for gone in self.histories.keys() - by_database.keys():
            del self.histories[gone]

    async def _refresh_loop(self) -> None:
        interval = self.config.status_interval_seconds
        while True:
            await asyncio.to_thread(self.refresh_once)
            await asyncio.sleep(interval)

    async def _maintenance_loop(self) -> None:
        interval = self.config.maintenance_interval_seconds
        while True:
            await asyncio.to_thread(
                self.databases.maintain_due, interval, self.config.retention_days
            )
            await asyncio.sleep(min(interval, 60.0))

    def alive(self) -> tuple[bool, str]:
        for task in self.tasks:
            if task.done():
                return False, f"background task {task.get_name()} stopped"
        return True, "ok"

    def ready(self) -> bool:
        if not self.config.default_dsn:
            return True  # only databaseRef resources: nothing to check up front
        try:
            self.databases.get(DEFAULT).store.db_now()
        except ClaimschedError:
            return False
        return True

    async def start(self) -> None:
        for name, loop in (("status-refresh", self._refresh_loop),
                           ("maintenance", self._maintenance_loop)):
            task = asyncio.create_task(loop(), name=f"claimsched-{name}")
            task.add_done_callback(_report_death)
            self.tasks.append(task)
        self.health = HealthServer(self.config.health_port, self.alive, self.ready)
        await self.health.start()

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.health is not None:
            await self.health.stop()
        await asyncio.to_thread(self.databases.close)
        await self.kube.close()


@dataclass
class Memo:
    """kopf's memo (`kopf.run(memo=...)`), typed: operator handlers get this one, and each
    resource's handlers a shallow copy of it, made when kopf first sees the resource. So the
    runtime is shared, and `observed` is per resource."""

    runtime: Runtime
    observed: observations.Observation | None = None  # what the status timer published last


def _series_key(entry: Entry) -> tuple[str, str, str]:
    namespace, _, name = entry.owner.partition("/")
    return namespace, name, entry.job_name


def _numbers(observed: observations.Observation) -> metrics.ScheduleNumbers:
    s = observed.status
    return metrics.ScheduleNumbers(
        missed_runs=s.missed_runs.last24h,
        failed_runs=s.failed_runs.last24h,
        orphaned_runs=s.orphaned_runs.current,
        without_agents=observed.enabled and s.live_agents == 0,
        late=s.late,
        consecutive_failures=s.consecutive_failures,
        failing=s.failing,
        last_success=observed.last_success,
    )


def _report_death(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.critical("background task %s died: %r", task.get_name(), task.exception(),
                     extra={"action": "task_died"})
