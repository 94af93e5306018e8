"""When an occurrence without a run is late (claimsched.schedule.deadlines): the default grace
by the schedule's period, and a job late since the oldest occurrence after its newest run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from claimsched.schedule.deadlines import GRACE_CAP, GRACE_FLOOR, grace, lateness, unrun
from claimsched.schedule.schedules import parse_schedule

NOW = datetime(2026, 6, 10, 12, 0, 31, tzinfo=UTC)
EVERY_2S = parse_schedule("@every 2s")
LONG_AGO = NOW - timedelta(days=1)


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("@every 2s", 10),  # the floor: a busy replica is not late
        ("@every 30s", 30),  # one period
        ("* * * * *", 60),
        ("*/2 * * * *", 120),
        ("*/5 * * * *", 300),
        ("@hourly", 300),  # the cap: a daily job does not go unnoticed for hours
        ("@daily", 300),
        ("0 9 * * 1-5", 300),
    ],
)
def test_the_default_grace_is_one_period_between_a_floor_and_a_cap(expression: str,
                                                                   seconds: int) -> None:
    assert grace(parse_schedule(expression)) == timedelta(seconds=seconds)
    assert GRACE_FLOOR <= grace(parse_schedule(expression)) <= GRACE_CAP


def test_a_starting_deadline_replaces_the_default_grace() -> None:
    assert grace(EVERY_2S, 3600) == timedelta(hours=1)
    assert grace(parse_schedule("@daily"), 1) == timedelta(seconds=1)
    assert grace(None) == GRACE_CAP  # an expression that cannot be read


def test_an_occurrence_without_a_run_is_due_then_late_then_missed() -> None:
    ten = timedelta(seconds=10)
    settled = NOW - timedelta(hours=1)
    assert unrun(NOW - timedelta(seconds=9), NOW, ten, settled) == "due"
    assert unrun(NOW - ten, NOW, ten, settled) == "late"  # its grace has passed
    assert unrun(settled + timedelta(seconds=1), NOW, ten, settled) == "late"
    assert unrun(settled, NOW, ten, settled) == "missed"
    assert unrun(NOW, NOW, ten, NOW) == "missed", "settled goes first (a schedule that is off)"


def test_a_fleet_that_stopped_a_minute_ago_is_late_since_the_occurrence_after_its_last_run(
) -> None:
    last = datetime(2026, 6, 10, 11, 59, 30, tzinfo=UTC)
    found = lateness(EVERY_2S, NOW, grace(EVERY_2S), LONG_AGO, last)
    assert found is not None
    assert found.since == last + timedelta(seconds=2)
    assert found.due == datetime(2026, 6, 10, 12, 0, 20, tzinfo=UTC)  # newest past 10 s
    assert found.occurrences == 30  # 11:59:32 to 12:00:30
    assert found.age == timedelta(seconds=59) and found.grace == timedelta(seconds=10)


def test_a_job_whose_newest_run_is_inside_the_grace_is_not_late() -> None:
    assert lateness(EVERY_2S, NOW, grace(EVERY_2S), LONG_AGO, NOW - timedelta(seconds=9)) is None
    # a run of a later occurrence than the one past its grace (a catch-up passed some over)
    assert lateness(EVERY_2S, NOW, grace(EVERY_2S), LONG_AGO, NOW - timedelta(seconds=1)) is None


def test_nothing_before_the_schedule_became_active_is_late() -> None:
    assert lateness(EVERY_2S, NOW, grace(EVERY_2S), NOW - timedelta(seconds=5), None) is None
    found = lateness(EVERY_2S, NOW, grace(EVERY_2S), NOW - timedelta(seconds=30), None)
    assert found is not None and found.since == datetime(2026, 6, 10, 12, 0, 2, tzinfo=UTC)
    assert found.occurrences == 15
    resumes = NOW + timedelta(hours=1)  # a suspension with an end, not over yet
    assert lateness(EVERY_2S, NOW, grace(EVERY_2S), resumes, None) is None


def test_a_daily_job_is_late_five_minutes_after_its_fire_time() -> None:
    daily = parse_schedule("0 12 * * *")
    yesterday = datetime(2026, 6, 9, 12, 0, tzinfo=UTC)
    assert lateness(daily, NOW, grace(daily), LONG_AGO - timedelta(days=1), yesterday) is None
    later = NOW + timedelta(minutes=5)
    found = lateness(daily, later, grace(daily), LONG_AGO - timedelta(days=1), yesterday)
    assert found is not None and found.since == datetime(2026, 6, 10, 12, 0, tzinfo=UTC)
    assert found.occurrences == 1
