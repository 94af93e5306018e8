"""What became of each occurrence: runs by class (their final outcome) and whether they needed
more than one attempt, who held each attempt, expected occurrences without a run (due, late or
missed), the newest N; and the clock changes the next fires fall on."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from claimsched.schedule.schedules import parse_schedule
from claimsched.web.occurrences import (
    Run,
    Window,
    classify,
    clock_change,
    counts,
    next_fires,
    occurrences,
    retried,
)

NOW = datetime(2026, 6, 10, 12, 0, 30, tzinfo=UTC)
MINUTELY = parse_schedule("* * * * *")


def at(minutes_ago: int) -> datetime:
    return NOW.replace(second=0) - timedelta(minutes=minutes_ago)


def window(**changes: object) -> Window:
    fields: dict[str, object] = {
        "active_since": NOW - timedelta(days=1),
        "enabled": True,
        "updated_at": NOW - timedelta(days=1),
        "settle_seconds": 600,
        "now": NOW,
        "grace": timedelta(seconds=100),
    }
    return Window(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "attempt", "orphans", "expected", "again"),
    [
        ("done", 1, 0, "done", False),
        ("failed", 1, 0, "failed", False),
        ("skipped", 1, 0, "skipped", False),
        ("running", 1, 0, "running", False),
        ("running", 2, 1, "running", True),
        ("done", 2, 0, "done", True),  # a failure retried, then done
        ("done", 1, 1, "done", True),  # orphaned, then finished by its owner all the same
        ("failed", 3, 2, "failed", True),
        ("pending", 0, 0, "waiting", False),
        ("orphaned", 1, 1, "waiting", True),
    ],
)
def test_a_run_is_classed_by_its_final_outcome_and_marked_when_it_needed_more_attempts(
    status: str, attempt: int, orphans: int, expected: str, again: bool
) -> None:
    run = Run(1, NOW, status, attempt, orphans)
    assert (classify(run), run.retried) == (expected, again)


@pytest.mark.parametrize(
    ("attempt", "owner", "earlier", "owners"),
    [
        (0, None, (), []),  # requested, not taken yet
        (1, "r1", (), ["r1"]),
        (2, "r1", ("r3",), ["r3", "r1"]),
        (3, "r3", ("r1", "r2"), ["r1", "r2", "r3"]),
        (3, "r1", ("r2",), [None, "r2", "r1"]),  # attempt 1 left no record (older history)
        (2, "r1", (), [None, "r1"]),
        (2, "r2", (None,), [None, "r2"]),  # an attempt recorded without an owner
    ],
)
def test_a_runs_owners_are_who_held_each_attempt_first_to_last(
    attempt: int, owner: str | None, earlier: tuple[str | None, ...], owners: list[str | None]
) -> None:
    run = Run(1, NOW, "done", attempt, claimed_by=owner, earlier_owners=earlier)
    assert run.owners == owners


def test_retried_occurrences_are_counted_beside_their_classes() -> None:
    runs = [Run(1, at(3), "done"), Run(2, at(2), "done", 3, 2), Run(3, at(1), "failed", 2, 0),
            Run(4, at(0), "failed")]
    found = occurrences(MINUTELY, runs, window(active_since=at(4)), limit=30)
    assert counts(found) == {**counts([]), "done": 2, "failed": 2}
    assert retried(found) == 2
    assert [o.retried for o in found] == [False, True, True, False]


def test_an_expected_occurrence_without_a_run_is_due_then_late_then_missed_once_settled(
) -> None:
    runs = [Run(i, at(i), "done") for i in range(1, 30) if i not in (1, 3, 20)]
    found = occurrences(MINUTELY, runs, window(), limit=30)
    classes = {o.fire_time: o.cls for o in found}
    assert classes[at(0)] == "due"  # the occurrence of this very minute, inside its grace
    assert classes[at(1)] == "due"  # 90 s old: its grace (100 s) has not passed
    assert classes[at(3)] == "late"  # past its grace; inside the 10 minutes it may be claimed
    assert classes[at(20)] == "missed"
    assert len(found) == 30 and [o.fire_time for o in found] == sorted(classes)
    assert counts(found)["done"] == 26


def test_nothing_at_or_before_active_since_is_expected() -> None:
    found = occurrences(MINUTELY, [], window(active_since=at(5)), limit=30)
    assert [o.fire_time for o in found] == [at(i) for i in (4, 3, 2, 1, 0)]


def test_a_schedule_that_is_off_expects_nothing_after_its_last_change_and_all_before_is_missed(
) -> None:
    found = occurrences(MINUTELY, [], window(enabled=False, updated_at=at(2)), limit=3)
    assert [(o.fire_time, o.cls) for o in found] == [
        (at(4), "missed"), (at(3), "missed"), (at(2), "missed")]


def test_any_run_at_the_fire_time_covers_the_occurrence_and_manual_runs_count_too() -> None:
    manual = NOW - timedelta(seconds=7)
    runs = [Run(1, manual, "done", kind="manual"), Run(2, at(1), "failed")]
    found = occurrences(MINUTELY, runs, window(active_since=at(2)), limit=30)
    assert [(o.fire_time, o.cls) for o in found] == [
        (at(1), "failed"), (at(0), "due"), (manual, "done")]


def test_only_the_newest_are_kept_whatever_their_mix() -> None:
    runs = [Run(i, at(i), "done") for i in range(0, 60, 2)]  # every other minute ran
    found = occurrences(MINUTELY, runs, window(settle_seconds=0), limit=30)
    assert len(found) == 30
    assert found[-1].fire_time == at(0) and found[0].fire_time == at(29)
    assert counts(found) == {**counts([]), "done": 15, "missed": 15}


def test_without_a_schedule_only_runs_are_shown() -> None:
    found = occurrences(None, [Run(1, at(5), "done")], window(), limit=30)
    assert [(o.cls, o.run.id if o.run else None) for o in found] == [("done", 1)]


def test_since_bounds_the_expected_occurrences() -> None:
    found = occurrences(MINUTELY, [], window(), limit=500, since=at(10))
    assert len(found) == 10


@pytest.mark.parametrize(
    ("zone", "day", "change"),
    [
        ("Europe/Berlin", date(2026, 3, 29), "clocks go forward 1 h"),
        ("Europe/Berlin", date(2026, 10, 25), "clocks go back 1 h"),
        ("America/New_York", date(2026, 3, 8), "clocks go forward 1 h"),
        ("America/New_York", date(2026, 11, 1), "clocks go back 1 h"),
        ("Australia/Lord_Howe", date(2026, 4, 5), "clocks go back 30 min"),
        ("Europe/Berlin", date(2026, 3, 28), None),
        ("UTC", date(2026, 3, 29), None),
    ],
)
def test_a_day_with_a_clock_change_says_which_way(zone: str, day: date, change: str | None) -> None:
    assert clock_change(ZoneInfo(zone), day) == change


def test_the_next_fires_flag_the_days_the_clock_changes() -> None:
    schedule = parse_schedule("30 2 * * *", "Europe/Berlin")
    fires = next_fires(schedule, datetime(2026, 3, 27, 12, tzinfo=UTC), 4)
    assert [f.local.date().day for f in fires] == [28, 29, 30, 31]
    assert [f.clock_change for f in fires] == [None, "clocks go forward 1 h", None, None]
    assert fires[1].at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 02:30 does not exist: 03:00
