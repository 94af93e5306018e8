"""One answer to "did its last due occurrence happen?", from the occurrences the web view shows
(`occurrences`): what `claimsched status JOB` prints and exits with, and what the JSON carries.

The last due occurrence is the newest expected or scheduled one at or before now (manual runs
are not occurrences of the schedule). Its verdict:

* done, running, skipped (a policy chose not to run it): healthy;
* failed, missed: not healthy;
* late: no run has started for it ``late_after`` seconds after its fire time (a run waiting for
  an owner counts as not started); before that it is *due*, healthy;
* suspended: healthy (someone chose it); disabled (its ClaimSchedule was deleted): not healthy;
* none: nothing was due yet since the schedule became active: healthy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from .model import Summary
from .occurrences import Occurrence

Verdict = Literal["done", "running", "skipped", "due", "late", "failed", "missed", "suspended",
                  "disabled", "none"]
HEALTHY: frozenset[Verdict] = frozenset({"done", "running", "skipped", "due", "suspended", "none"})
LATE_AFTER_SECONDS = 60  # default: no run started a minute after the fire time is late


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

    @property
    def healthy(self) -> bool:
        return self.verdict in HEALTHY

    def line(self) -> str:
        """One line for people: ``JOB VERDICT: what happened; last success; next``."""
        parts = [f"{self.job_name} {self.verdict}"]
        if self.verdict == "suspended":
            until = f"until {_utc(self.suspend_until)}" if self.suspend_until else "until resumed"
            parts[0] += f" {until}" + (f" ({self.suspend_reason})" if self.suspend_reason else "")
        o = self.occurrence
        if o is not None:
            what = f"occurrence {_utc(o.fire_time)}"
            if o.run is not None:
                what += f" {o.run.status} (attempt {o.run.attempt})"
            elif self.verdict in ("due", "late"):
                what += f" has no run yet, {_age(self.now - o.fire_time)} after its fire time"
            else:
                what += " has no run"
            parts.append(what)
        elif self.verdict == "none":
            parts.append("nothing was due yet")
        parts.append(f"last success {_utc(self.last_success) or 'never'}")
        parts.append(f"next {_utc(self.next_fire) or '-'}")
        return "; ".join(parts)

    def json(self) -> dict[str, Any]:
        o = self.occurrence
        run = o.run if o is not None else None
        return {
            "job": self.job_name,
            "verdict": self.verdict,
            "healthy": self.healthy,
            "fire_time": _utc(o.fire_time) if o is not None else None,
            "run": None if run is None else {
                "id": run.id, "status": run.status, "attempt": run.attempt, "kind": run.kind},
            "last_success": _utc(self.last_success),
            "next_fire": _utc(self.next_fire),
            "suspend_until": _utc(self.suspend_until),
            "suspend_reason": self.suspend_reason,
            "now": _utc(self.now),
        }


def judge(summary: Summary, now: datetime, late_after: int = LATE_AFTER_SECONDS) -> Health:
    """The verdict on a schedule's last due occurrence, by the database clock ``now``."""
    last = _last_due(summary.strip, now)
    verdict: Verdict
    if summary.state != "enabled":
        verdict = summary.state
    elif last is None:
        verdict = "none"
    elif last.cls in ("done", "failed", "running", "skipped", "missed"):
        verdict = last.cls
    elif last.cls == "reclaimed":
        verdict = "done" if last.run is not None and last.run.status == "done" else "failed"
    else:  # due, or waiting for an owner
        verdict = "late" if now - last.fire_time > timedelta(seconds=late_after) else "due"
    next_fire = summary.next_fire.at if summary.next_fire is not None else None
    return Health(summary.job_name, verdict, last, summary.last_success, next_fire, now,
                  summary.suspend_until, summary.suspend_reason)


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
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
