"""What the pages and the JSON show, read through `claimsched.db.Views`: typed records with
every error text already redacted, so neither rendering can leak a password."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..db import Views, redact_text
from ..db.views import RECENT_RUNS
from ..errors import InvalidSchedule, UnknownTimeZone
from ..schedule.deadlines import Lateness, grace, lateness
from ..schedule.schedules import Schedule, parse_schedule
from .describe import describe
from .occurrences import Fire, Occurrence, Run, Window, next_fires, occurrences

TIMELINE_DAYS = 7  # the schedule page's timeline
TIMELINE_LIMIT = 500  # occurrences at most on it (the newest)
NEXT_FIRES = 10

State = Literal["enabled", "suspended", "disabled"]


@dataclass(frozen=True)
class Summary:
    """One schedule on the overview: its state, its newest occurrences, what comes next."""

    job_name: str
    expression: str
    resolved: str  # the expression with hashed fields (H) written out; else the expression
    description: str
    time_zone: str
    state: State
    suspend_reason: str | None
    suspend_until: datetime | None  # suspended until then (state "suspended" before it)
    source: str
    owner: str | None
    live_agents: int
    last_success: datetime | None
    next_fire: Fire | None
    strip: list[Occurrence]
    problem: str | None  # why the expression or zone cannot be read, if it cannot
    schedule: Schedule | None
    window: Window
    lateness: Lateness | None  # while enabled: late since when (claimsched.schedule.deadlines)


@dataclass(frozen=True)
class Overview:
    now: datetime
    schedules: list[Summary]


@dataclass(frozen=True)
class Detail:
    """One schedule's page: the summary, the timeline of the last days, the next fires."""

    summary: Summary
    now: datetime
    since: datetime
    timeline: list[Occurrence]
    next_fires: list[Fire]


@dataclass(frozen=True)
class Receipt:
    entity: str
    attempt: int
    recorded_at: datetime


@dataclass(frozen=True)
class Attempt:
    """One attempt at a run's occurrence: who held it, when, and how it ended (a superseded
    attempt: orphaned, fenced_out or failed; the run's own, current or last, attempt: the run's
    status)."""

    number: int
    claimed_by: str | None
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str
    error: str | None
    superseded: bool = True  # False for the run's own attempt


@dataclass(frozen=True)
class RunDetail:
    run: Run
    job_name: str
    lease_until: datetime | None
    retry_at: datetime | None
    max_attempts: int | None  # None when the schedule row is gone
    schedule_known: bool
    attempts: list[Attempt]  # oldest first; the last is the run's own
    effects: list[Receipt]
    effect_count: int
    now: datetime

    @property
    def duration(self) -> timedelta | None:
        started, finished = self.run.started_at, self.run.finished_at
        if started is None:
            return None
        end = finished or (self.now if self.run.status == "running" else None)
        return end - started if end else None


@dataclass(frozen=True)
class Agent:
    agent_id: str
    alive: bool
    hostname: str
    pod: str | None
    namespace: str | None
    handlers: list[str]
    version: str
    started_at: datetime
    last_seen: datetime
    stopped_at: datetime | None
    ttl_seconds: int


def overview(views: Views) -> Overview:
    rows = views.schedules()
    now = rows[0]["db_now"] if rows else datetime.now(UTC)
    return Overview(now, [_summary(row) for row in rows])


def summary(views: Views, job_name: str, deadline_seconds: int | None = None) -> Summary | None:
    """One schedule as the overview shows it (one statement), or None when there is none;
    `deadline_seconds` replaces the schedule's default grace (claimsched.schedule.deadlines)."""
    rows = views.schedules(job_name)
    return _summary(rows[0], deadline_seconds) if rows else None


def detail(views: Views, job_name: str) -> Detail | None:
    found = summary(views, job_name)
    if found is None:
        return None
    now = found.window.now
    since = now - timedelta(days=TIMELINE_DAYS)
    runs = [_run(row, row["earlier_owners"])
            for row in views.schedule_runs(job_name, since, TIMELINE_LIMIT)]
    timeline = occurrences(found.schedule, runs, found.window, TIMELINE_LIMIT, since)
    fires = (next_fires(found.schedule, max(now, found.window.active_since), NEXT_FIRES)
             if found.schedule else [])
    return Detail(found, now, since, timeline, fires)


def run_detail(views: Views, run_id: int) -> RunDetail | None:
    row = views.run(run_id)
    if row is None:
        return None
    effects = [
        Receipt(*fields)
        for fields in zip(row["effect_entities"], row["effect_attempts"],
                          row["effect_recorded_at"], strict=True)
    ]
    run = _run(row, row["attempt_owners"])
    superseded = [
        Attempt(number, owner, started, ended, outcome, redact_text(error) if error else None)
        for number, owner, started, ended, outcome, error in zip(
            row["attempt_numbers"], row["attempt_owners"], row["attempt_started_at"],
            row["attempt_ended_at"], row["attempt_outcomes"], row["attempt_errors"], strict=True)
    ]
    last = Attempt(run.attempt, run.claimed_by, run.started_at, run.finished_at, run.status,
                   run.error, superseded=False)
    return RunDetail(
        run=run,
        job_name=row["job_name"],
        lease_until=row["lease_until"],
        retry_at=row["retry_at"],
        max_attempts=row["max_attempts"],
        schedule_known=row["schedule"] is not None,
        attempts=[*superseded, last] if run.attempt > 0 else superseded,
        effects=effects,
        effect_count=row["effect_count"],
        now=row["db_now"],
    )


def agents(views: Views) -> tuple[list[Agent], datetime]:
    """The agents, and the database clock."""
    rows = views.agents()
    now = rows[0]["db_now"] if rows else datetime.now(UTC)
    return [Agent(**{name: row[name] for name in Agent.__dataclass_fields__}) for row in rows], now


def state_of(enabled: bool, source: str, owner: str | None, suspended_until: datetime | None,
             now: datetime) -> State:
    """enabled (suspended while a suspension with an end lasts); disabled when its
    ClaimSchedule was deleted (the operator let go of the row); suspended otherwise."""
    if enabled:
        return "suspended" if suspended_until is not None and suspended_until > now else "enabled"
    return "disabled" if source == "operator" and owner is None else "suspended"


def _summary(row: dict[str, Any], deadline_seconds: int | None = None) -> Summary:
    schedule: Schedule | None = None
    problem = None
    try:
        schedule = parse_schedule(row["schedule"], row["time_zone"], row["job_name"])
    except (InvalidSchedule, UnknownTimeZone) as error:
        problem = str(error)
    now, until = row["db_now"], row["suspend_until"]
    window = Window(
        active_since=row["active_since"] if until is None else max(row["active_since"], until),
        enabled=row["enabled"],
        updated_at=row["updated_at"],
        settle_seconds=row["catch_up_window_seconds"] + row["lease_seconds"],
        now=now,
        grace=grace(schedule, deadline_seconds),
    )
    state = state_of(row["enabled"], row["source"], row["owner"], until, now)
    runs = [
        Run(run_id, fire_time, status, attempt, orphans, kind, claimed_by=owner,
            earlier_owners=tuple(earlier))
        for run_id, fire_time, status, attempt, orphans, kind, owner, earlier in zip(
            row["run_ids"], row["run_fire_times"], row["run_statuses"], row["run_attempts"],
            row["run_orphan_counts"], row["run_kinds"], row["run_owners"],
            row["run_earlier_owners"], strict=True)
    ]
    upcoming = next_fires(schedule, max(now, window.active_since), 1) \
        if schedule and row["enabled"] else []
    return Summary(
        job_name=row["job_name"],
        expression=row["schedule"],
        resolved=schedule.resolved if schedule else row["schedule"],
        description=describe(schedule.resolved if schedule else row["schedule"]),
        time_zone=row["time_zone"],
        state=state,
        suspend_reason=row["suspend_reason"],
        suspend_until=until,
        source=row["source"],
        owner=row["owner"],
        live_agents=row["live_agents"],
        last_success=row["last_success"],
        next_fire=upcoming[0] if upcoming else None,
        strip=occurrences(schedule, runs, window, RECENT_RUNS),
        problem=problem,
        schedule=schedule,
        window=window,
        lateness=_lateness(schedule, state, window, row["latest_occurrence"]),
    )


def _lateness(schedule: Schedule | None, state: State, window: Window,
              latest_run: datetime | None) -> Lateness | None:
    """Whether an enabled schedule is late; one that is off or cannot be read never is."""
    if schedule is None or state != "enabled":
        return None
    return lateness(schedule, window.now, window.grace, window.active_since, latest_run)


def _run(row: dict[str, Any], earlier_owners: Sequence[str | None]) -> Run:
    error = row["error"]
    return Run(
        id=row["id"],
        fire_time=row["fire_time"],
        status=row["status"],
        attempt=row["attempt"],
        orphan_count=row["orphan_count"],
        kind=row["kind"],
        claimed_by=row["claimed_by"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=redact_text(error) if error else None,
        earlier_owners=tuple(earlier_owners),
    )
