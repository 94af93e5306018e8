"""The demo's verdict from the database: every occurrence ran, no side effect twice, late work
refused."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from ...db import RunRow
from ...schedule.schedules import Schedule
from . import app
from .observations import Effects, Observations


def verdict(
    runs: list[RunRow], effects: Effects, windows: dict[str, tuple[Schedule, datetime]],
    end: datetime, seen: Observations, scenario_complete: bool,
) -> dict[str, Any]:
    """The summary: occurrences expected vs seen, duplicates, orphans, refusals, and checks."""
    rows = [r for r in runs if r.kind == "scheduled" and r.job_name in windows]
    by_job: dict[str, dict[str, Any]] = {}
    for job, (schedule, since) in windows.items():
        expected = schedule.between(since, end)
        present = {r.fire_time for r in rows if r.job_name == job}
        missing = [t for t in expected if t not in present]
        by_job[job] = {"expected": len(expected), "seen": len(expected) - len(missing),
                       "missed": [t.isoformat() for t in missing],
                       "after_window": len(present - set(expected))}
    copies = Counter((key, entity) for key, done in effects.items() for entity, _, _ in done)
    duplicates = sum(n - 1 for n in copies.values())
    incomplete = [r for r in rows if r.status == "done" and set(app.EFFECTS[r.job_name])
                  - {e for e, _, _ in effects.get((r.job_name, r.fire_time), [])}]
    expected_total = sum(j["expected"] for j in by_job.values())
    missed_total = sum(len(j["missed"]) for j in by_job.values())
    orphans = sum(1 for r in rows if r.attempt > 1 and r.orphan_count > 0)
    checks = {
        "no_missed_occurrences": missed_total == 0 and expected_total > 0,
        "no_duplicate_effects": duplicates == 0,
        "finished_runs_have_all_effects": not incomplete,
        "orphan_reclaimed": orphans >= 1,
        "fenced_completion_refused": seen.fenced_completions >= 1,
        "scenario_complete": scenario_complete,
    }
    return {
        "held": all(checks.values()),
        "checks": checks,
        "reasons": [name.replace("_", " ") + ": no" for name, ok in checks.items() if not ok],
        "window": {"start": min(s for _, s in windows.values()).isoformat(),
                   "end": end.isoformat()},
        "occurrences": {"expected": expected_total, "seen": expected_total - missed_total,
                        "missed": missed_total, "by_job": by_job},
        "runs": {"rows": len(rows), "attempts": sum(r.attempt for r in rows),
                 "by_status": dict(Counter(r.status for r in rows))},
        "effects": {"recorded": sum(copies.values()), "duplicates": duplicates,
                    "incomplete_runs": len(incomplete)},
        "orphans_reclaimed": orphans,
        "fenced": {"completions_refused": seen.fenced_completions,
                   "effects_refused": seen.refused_effect_count},
    }
