"""The operator's per-job schedule cache answers what the schedule itself answers, as windows
slide, `now` passes fire times, and the schedule or the row changes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from claimsched.schedule.schedules import Schedule
from claimsched_operator.models import MissedRuns, rfc3339
from claimsched_operator.observations import NEXT_FIRE_TIMES, OccurrenceCounter, observe

START = datetime(2024, 3, 30, 22, 7, 13, tzinfo=UTC)  # across the Berlin gap of 2024-03-31
STEPS = [timedelta(seconds=s) for s in (1, 29, 300, 1799, 3600, 7, 86_400, 5400)]


def slide(schedule: Schedule, counter: OccurrenceCounter, job: str = "job") -> None:
    now = START
    for step in STEPS:
        now += step
        day_start, history_start, end = now - timedelta(hours=24), START, now
        assert counter.count(job, "day", schedule, day_start, end) == len(
            schedule.between(day_start, end))
        assert counter.count(job, "all", schedule, history_start, end) == len(
            schedule.between(history_start, end))
        assert counter.upcoming(job, schedule, now) == [
            rfc3339(t) for t in schedule.upcoming(now, NEXT_FIRE_TIMES)]


@pytest.mark.parametrize("expression", ["*/30 * * * *", "0 2 * * *", "@every 1h", "* * * * *"])
def test_counts_and_next_fire_times_match_the_schedule_as_time_moves(
        expression: str) -> None:
    slide(Schedule(expression, "Europe/Berlin"), OccurrenceCounter())


def test_a_changed_schedule_of_the_same_job_is_counted_afresh() -> None:
    counter = OccurrenceCounter()
    slide(Schedule("*/30 * * * *"), counter)
    slide(Schedule("0 * * * *"), counter)  # same job, new expression
    slide(Schedule("0 * * * *", "Asia/Kolkata"), counter)  # same expression, new zone


def test_a_window_that_moves_back_is_counted_afresh() -> None:
    counter, schedule = OccurrenceCounter(), Schedule("0 * * * *")
    end = START + timedelta(days=2)
    assert counter.count("job", "all", schedule, START, end) == 48
    assert counter.count("job", "all", schedule, START - timedelta(hours=5), end) == 53
    assert counter.count("job", "all", schedule, START, end - timedelta(hours=3)) == 45


def test_forget_drops_a_job() -> None:
    counter, schedule = OccurrenceCounter(), Schedule("0 * * * *")
    counter.count("job", "all", schedule, START, START + timedelta(days=1))
    counter.forget("job")
    assert not counter._jobs


def row(now: datetime, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "job_name": "job", "enabled": True, "suspend_until": None, "db_now": now,
        "day_start": max(START, now - timedelta(hours=24)), "history_start": START,
        "settled_end": now,
        "seen_day": 0, "seen_history": 0, "latest_seen": None,
        "last_fire_time": None, "last_status": None, "last_attempt": None,
        "last_claimed_by": None, "last_started_at": None, "last_finished_at": None,
        "last_error": None, "last_successful_time": None, "active_runs": 0,
        "orphaned_current": 0, "orphaned_day": 0, "failed_day": 0, "exhausted_day": 0,
        "live_agents": 1, "active_since": START, "latest_occurrence": now,  # not late
        "consecutive_failures": 0, "consecutive_successes": 0, "durability": "standalone",
        "agent_tzdata": ["2025b"],
    }
    values.update(changes)
    return values


def test_observe_follows_the_row_and_the_schedule_between_refreshes() -> None:
    counter, hourly = OccurrenceCounter(), Schedule("0 * * * *")
    now = START + timedelta(hours=3)
    observed = observe(row(now), hourly, counter)
    first = observed.status
    assert first.missed_runs.total == 3 and first.last_run is None
    assert first.next_fire_time == "2024-03-31T02:00:00Z"
    assert first.missed_runs.last_missed_time == "2024-03-31T01:00:00Z"
    # the newest occurrence ran: the last missed time stays what the previous refresh said
    said = MissedRuns(last24h=3, total=3, last_missed_time="2024-03-30T23:00:00Z")
    prior = replace(observed, status=first.model_copy(update={"missed_runs": said}))
    fired = START.replace(minute=0, second=0) + timedelta(hours=3)
    later = observe(row(now, seen_history=2, seen_day=2, last_fire_time=fired,
                        last_status="failed", last_attempt=2, last_error="boom",
                        latest_seen=fired), hourly, counter, prior).status
    assert later.missed_runs.model_dump() == {
        "last24h": 1, "total": 1, "last_missed_time": "2024-03-30T23:00:00Z"}
    assert later.last_run is not None and later.last_run.dump() == {
        "fireTime": "2024-03-31T01:00:00Z", "status": "failed", "attempt": 2, "error": "boom"}
    half_hourly = observe(row(now), Schedule("*/30 * * * *"), counter).status
    assert half_hourly.missed_runs.total == 6
    assert half_hourly.next_fire_times[:2] == ["2024-03-31T01:30:00Z", "2024-03-31T02:00:00Z"]
    assert observe(row(now, enabled=False), hourly, counter).status.next_fire_times == []


def test_an_unchanged_job_keeps_its_observation_and_a_change_makes_a_new_one() -> None:
    counter, hourly = OccurrenceCounter(), Schedule("0 * * * *")
    now = START + timedelta(hours=3)
    first = observe(row(now), hourly, counter)
    assert observe(row(now + timedelta(seconds=15)), hourly, counter, first) is first
    ran = observe(row(now + timedelta(seconds=30), active_runs=1), hourly, counter, first)
    assert ran is not first and ran.status.active_runs == 1
    passed = observe(row(now + timedelta(hours=1)), hourly, counter, first)  # 02:00 fell
    assert passed is not first and passed.status.next_fire_time == "2024-03-31T03:00:00Z"
    assert passed.status.missed_runs.total == 4


def test_jobs_with_equal_schedules_and_windows_share_one_computation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh of many jobs of one schedule counts, looks back and looks ahead once, not once
    per job (the first refresh of 10,000 jobs did it for each)."""
    asked: list[str] = []
    for method in ("count_between", "next_after", "latest_at_or_before", "upcoming"):
        original = getattr(Schedule, method)

        def recorded(self: Schedule, *args: Any, _original: Any = original,
                     _method: str = method) -> Any:
            asked.append(_method)
            return _original(self, *args)

        monkeypatch.setattr(Schedule, method, recorded)
    counter, now = OccurrenceCounter(), START + timedelta(days=3, seconds=11)
    for job in range(50):
        schedule = Schedule("17 * * * *", "Europe/Berlin", f"job-{job}")
        assert counter.count(f"job-{job}", "all", schedule, START, now) == 72
        assert len(counter.upcoming(f"job-{job}", schedule, now)) == NEXT_FIRE_TIMES
    assert sorted(asked) == ["count_between", "next_after", "next_after", "upcoming"]


def test_a_refresh_asks_a_schedule_once_for_the_jobs_that_share_its_windows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs of one schedule whose windows have equal bounds share their figures within a
    refresh: the second job neither counts nor looks ahead, and its status is the same."""
    counter, now = OccurrenceCounter(), START + timedelta(hours=3)
    shared: dict[tuple[Any, ...], Any] = {}
    first = observe(row(now), Schedule("0 * * * *", "UTC", "a"), counter, shared=shared)
    monkeypatch.setattr(OccurrenceCounter, "count", None)
    monkeypatch.setattr(OccurrenceCounter, "upcoming", None)
    second = observe(row(now, job_name="b"), Schedule("0 * * * *", "UTC", "b"), counter,
                     shared=shared)
    assert second.status == first.status and second.status.missed_runs.total == 3
