"""The JSON under /api/: the same records the pages show, times in UTC ISO 8601 (next fires
also in the schedule's own zone). An occurrence carries its class, whether it was `retried`
(needed more than one attempt) and, with a run, the run's `owners`: who held each attempt,
first to last (null: not recorded); `counts` has one entry per class and `retried` beside it
counts the retried occurrences."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .model import Agent, Detail, Overview, RunDetail, Summary
from .occurrences import Fire, Occurrence, Run, counts, retried
from .verdict import judge


def overview(data: Overview) -> dict[str, Any]:
    return {"now": _utc(data.now), "schedules": [_summary(s) for s in data.schedules]}


def detail(data: Detail) -> dict[str, Any]:
    return {
        **_summary(data.summary),
        "now": _utc(data.now),
        "timeline": {
            "since": _utc(data.since),
            "counts": counts(data.timeline),
            "retried": retried(data.timeline),
            "occurrences": [_occurrence(o, full=True) for o in data.timeline],
        },
        "next_fires": [_fire(f) for f in data.next_fires],
    }


def run(data: RunDetail) -> dict[str, Any]:
    duration = data.duration
    return {
        **_run(data.run),
        "job": data.job_name,
        "lease_until": _utc(data.lease_until),
        "retry_at": _utc(data.retry_at),
        "max_attempts": data.max_attempts,
        "schedule_known": data.schedule_known,
        "duration_seconds": duration.total_seconds() if duration is not None else None,
        "attempts": [
            {"attempt": a.number, "claimed_by": a.claimed_by, "started_at": _utc(a.started_at),
             "ended_at": _utc(a.ended_at), "outcome": a.outcome, "error": a.error}
            for a in data.attempts
        ],
        "effects": {
            "count": data.effect_count,
            "shown": [
                {"entity": e.entity, "attempt": e.attempt, "recorded_at": _utc(e.recorded_at)}
                for e in data.effects
            ],
        },
        "now": _utc(data.now),
    }


def agents(data: list[Agent], now: datetime) -> dict[str, Any]:
    return {
        "now": _utc(now),
        "agents": [
            {
                "agent_id": a.agent_id,
                "alive": a.alive,
                "hostname": a.hostname,
                "pod": a.pod,
                "namespace": a.namespace,
                "handlers": a.handlers,
                "version": a.version,
                "started_at": _utc(a.started_at),
                "last_seen": _utc(a.last_seen),
                "stopped_at": _utc(a.stopped_at),
                "ttl_seconds": a.ttl_seconds,
            }
            for a in data
        ]
    }


def _summary(s: Summary) -> dict[str, Any]:
    return {
        "job": s.job_name,
        "schedule": s.expression,
        "resolved_schedule": s.resolved,
        "description": s.description,
        "time_zone": s.time_zone,
        "state": s.state,
        "suspend_reason": s.suspend_reason,
        "suspend_until": _utc(s.suspend_until),
        "source": s.source,
        "owner": s.owner,
        "live_agents": s.live_agents,
        "last_success": _utc(s.last_success),
        "next_fire": _fire(s.next_fire) if s.next_fire else None,
        "problem": s.problem,
        **judge(s).facts(),  # verdict, healthy, reasons, live_agents, grace_seconds, late
        "recent": {
            "counts": counts(s.strip),
            "retried": retried(s.strip),
            "occurrences": [_occurrence(o, full=False) for o in s.strip],
        },
    }


def _occurrence(o: Occurrence, *, full: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"fire_time": _utc(o.fire_time), "class": o.cls,
                             "retried": o.retried}
    if o.run is not None:
        found["run"] = _run(o.run) if full else {
            "id": o.run.id, "status": o.run.status, "attempt": o.run.attempt,
            "orphan_count": o.run.orphan_count, "kind": o.run.kind, "owners": o.run.owners}
    return found


def _run(r: Run) -> dict[str, Any]:
    return {
        "id": r.id,
        "fire_time": _utc(r.fire_time),
        "kind": r.kind,
        "status": r.status,
        "attempt": r.attempt,
        "orphan_count": r.orphan_count,
        "claimed_by": r.claimed_by,
        "owners": r.owners,
        "started_at": _utc(r.started_at),
        "finished_at": _utc(r.finished_at),
        "error": r.error,
    }


def _fire(f: Fire) -> dict[str, Any]:
    return {"utc": _utc(f.at), "local": f.local.isoformat(), "clock_change": f.clock_change}


def _utc(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None
