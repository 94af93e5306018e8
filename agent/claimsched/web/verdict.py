"""One answer to "is this job healthy?", from what the web view shows (`Summary`): what
`claimsched status JOB` prints and exits with, and what the JSON and the pages carry.

The verdict is on the job's occurrences:

* late: an occurrence past its grace has no run, nor any later one (claimsched.schedule.deadlines);
  missed instead when that occurrence is settled already (no agent claims it any more);
* otherwise the last due occurrence's (the newest expected or scheduled one at or before now;
  manual runs are not occurrences of the schedule): done, running, skipped (a policy chose not to
  run it), waiting (its run waits for an owner: requested, or orphaned and being reclaimed),
  due (no run yet, inside its grace): healthy; failed, missed: not healthy;
* suspended: healthy (someone chose it); disabled (its ClaimSchedule was deleted): not healthy;
* none: nothing was due yet since the schedule became active: healthy.

A job is healthy when its verdict is, and, while it is enabled, at least one live agent has
a handler for it: a job that no live agent handles runs nothing, whatever its last run was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..schedule.deadlines import Lateness
from .model import Summary
from .occurrences import Occurrence

Verdict = Literal["done", "running", "skipped", "waiting", "due", "late", "failed", "missed",
                  "suspended", "disabled", "none"]
HEALTHY: frozenset[Verdict] = frozenset(
    {"done", "running", "skipped", "waiting", "due", "suspended", "none"})
NO_LIVE_AGENT = "no_live_agent"  # the reason a job with a healthy verdict may still be unhealthy


@dataclass(frozen=True)
class Health:
    """A schedule's verdict and the facts behind it."""

    job_name: str
    verdict: Verdict
    occurrence: Occurrence | None  # the last due occurrence, if any
    last_success: datetime | None
    next_fire: datetime | None
    now: datetime
    suspend_until: datetime | None = None
    suspend_reason: str | None = None
    live_agents: int = 0
    handled: bool = True  # off, or enabled with a live agent that has a handler for it
    lateness: Lateness | None = None
    grace: timedelta | None = None

    @property
    def reasons(self) -> list[str]:
        """Why it is not healthy (empty when it is): its verdict, and `no_live_agent`."""
        found: list[str] = [] if self.verdict in HEALTHY else [self.verdict]
        return found if self.handled else [*found, NO_LIVE_AGENT]

    @property
    def healthy(self) -> bool:
        return not self.reasons

    def line(self) -> str:
        """One line for people: ``JOB VERDICT; what happened; [no live agent handles it;]
        last success; next``."""
        parts = [f"{self.job_name} {self.verdict}"]
        if self.verdict == "suspended":
            until = f"until {_utc(self.suspend_until)}" if self.suspend_until else "until resumed"
            parts[0] += f" {until}" + (f" ({self.suspend_reason})" if self.suspend_reason else "")
        what = self._what()
        if what:
            parts.append(what)
        if not self.handled:
            parts.append("no live agent handles it")
        parts.append(f"last success {_utc(self.last_success) or 'never'}")
        parts.append(f"next {_utc(self.next_fire) or '-'}")
        return "; ".join(parts)

    def _what(self) -> str | None:
        late, o = self.lateness, self.occurrence
        if late is not None:
            count = (f"{late.occurrences} occurrences since" if late.occurrences > 1
                     else "the occurrence of")
            verb = "have" if late.occurrences > 1 else "has"
            return (f"{count} {_utc(late.since)} {verb} no run, the oldest {_age(late.age)} "
                    f"after its fire time (grace {_age(late.grace)})")
        if o is None:
            return "nothing was due yet" if self.verdict == "none" else None
        what = f"occurrence {_utc(o.fire_time)}"
        if o.run is not None:
            return what + f" {o.run.status} (attempt {o.run.attempt})"
        if self.verdict == "due":
            return what + f" has no run yet, {_age(self.now - o.fire_time)} after its fire time"
        return what + " has no run"

    def facts(self) -> dict[str, Any]:
        """The verdict and the health, as the JSON of `status` and of the web view say them."""
        late = self.lateness
        return {
            "verdict": self.verdict,
            "healthy": self.healthy,
            "reasons": self.reasons,
            "live_agents": self.live_agents,
            "grace_seconds": self.grace.total_seconds() if self.grace is not None else None,
            "late": None if late is None else {
                "since": _utc(late.since), "due": _utc(late.due),
                "occurrences": late.occurrences, "seconds": late.age.total_seconds(),
                "grace_seconds": late.grace.total_seconds()},
        }

    def json(self) -> dict[str, Any]:
        o = self.occurrence
        run = o.run if o is not None else None
        return {
            "job": self.job_name,
            **self.facts(),
            "fire_time": _utc(o.fire_time) if o is not None else None,
            "run": None if run is None else {
                "id": run.id, "status": run.status, "attempt": run.attempt, "kind": run.kind},
            "last_success": _utc(self.last_success),
            "next_fire": _utc(self.next_fire),
            "suspend_until": _utc(self.suspend_until),
            "suspend_reason": self.suspend_reason,
            "now": _utc(self.now),
        }


def judge(summary: Summary) -> Health:
    """The verdict on a schedule, by the database clock the summary was read at."""
    now = summary.window.now
    last = _last_due(summary.strip, now)
    next_fire = summary.next_fire.at if summary.next_fire is not None else None
    return Health(summary.job_name, _verdict(summary, last), last, summary.last_success,
                  next_fire, now, summary.suspend_until, summary.suspend_reason,
                  live_agents=summary.live_agents,
                  handled=summary.state != "enabled" or summary.live_agents > 0,
                  lateness=summary.lateness, grace=summary.window.grace)


def _verdict(summary: Summary, last: Occurrence | None) -> Verdict:
    if summary.state != "enabled":
        return summary.state
    late = summary.lateness
    if late is not None:
        return "missed" if late.due <= summary.window.settled else "late"
    if last is None:
        return "none"
    return last.cls


def _last_due(strip: list[Occurrence], now: datetime) -> Occurrence | None:
    for occurrence in reversed(strip):
        if occurrence.fire_time <= now and (
                occurrence.run is None or occurrence.run.kind != "manual"):
            return occurrence
    return None


def _utc(t: datetime | None) -> str | None:
    return t.astimezone(UTC).isoformat() if t is not None else None


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    return f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"
