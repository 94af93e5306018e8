"""Fire times on daylight saving transition days, with exact UTC instants.

Fixed local times run exactly once on both transition days (a skipped time at the end of the gap,
a repeated time at its first occurrence); jobs whose hour field is ``*`` or a step run at every
real occurrence. Zones: Europe/Berlin, America/New_York, Australia/Lord_Howe (30-minute shift),
and America/Santiago and America/Havana, whose clocks jump at midnight (2024).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from claimsched.schedule.schedules import parse_schedule


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def fires_on(expression: str, zone: str, day: date) -> list[datetime]:
    """The fire times whose local date is ``day``."""
    around = datetime(day.year, day.month, day.day, tzinfo=UTC)
    fires = parse_schedule(expression, zone).between(around - timedelta(days=2),
                                                     around + timedelta(days=2))
    return [fire for fire in fires if fire.astimezone(ZoneInfo(zone)).date() == day]


def local_times(fires: list[datetime], zone: str) -> list[str]:
    return [fire.astimezone(ZoneInfo(zone)).strftime("%H:%M%z") for fire in fires]


BERLIN, NEW_YORK, LORD_HOWE = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"
SANTIAGO, HAVANA = "America/Santiago", "America/Havana"

# (zone, local wall time, what it is) on the 2024 transition days used below.
TRANSITIONS = [
    (BERLIN, datetime(2024, 3, 31, 2, 30), "skipped"),
    (BERLIN, datetime(2024, 10, 27, 2, 30), "repeated"),
    (NEW_YORK, datetime(2024, 3, 10, 2, 30), "skipped"),
    (NEW_YORK, datetime(2024, 11, 3, 1, 30), "repeated"),
    (LORD_HOWE, datetime(2024, 10, 6, 2, 15), "skipped"),
    (LORD_HOWE, datetime(2024, 4, 7, 1, 45), "repeated"),
    (SANTIAGO, datetime(2024, 9, 8, 0, 0), "skipped"),
    (SANTIAGO, datetime(2024, 4, 6, 23, 30), "repeated"),
    (HAVANA, datetime(2024, 3, 10, 0, 0), "skipped"),
    (HAVANA, datetime(2024, 11, 3, 0, 0), "repeated"),
]


@pytest.mark.parametrize(("zone", "wall", "kind"), TRANSITIONS)
def test_zone_data_has_the_transitions_these_tests_expect(
    zone: str, wall: datetime, kind: str
) -> None:
    first, second = wall.replace(tzinfo=ZoneInfo(zone)), wall.replace(tzinfo=ZoneInfo(zone), fold=1)
    round_trip = first.astimezone(UTC).astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    if kind == "skipped":
        assert round_trip != wall
    else:
        assert round_trip == wall and first.utcoffset() != second.utcoffset()


@pytest.mark.parametrize(
    ("zone", "day", "expression", "expected"),
    [
        (BERLIN, date(2024, 3, 31), "30 2 * * *", [utc(2024, 3, 31, 1, 0)]),
        (NEW_YORK, date(2024, 3, 10), "30 2 * * *", [utc(2024, 3, 10, 7, 0)]),
        (LORD_HOWE, date(2024, 10, 6), "15 2 * * *", [utc(2024, 10, 5, 15, 30)]),
        (SANTIAGO, date(2024, 9, 8), "0 0 * * *", [utc(2024, 9, 8, 4, 0)]),
        (SANTIAGO, date(2024, 9, 8), "@daily", [utc(2024, 9, 8, 4, 0)]),
        (HAVANA, date(2024, 3, 10), "30 0 * * *", [utc(2024, 3, 10, 5, 0)]),
    ],
)
def test_fixed_time_in_spring_gap_runs_at_first_valid_instant(
    zone: str, day: date, expression: str, expected: list[datetime]
) -> None:
    assert fires_on(expression, zone, day) == expected


@pytest.mark.parametrize(
    ("zone", "day", "expression", "expected"),
    [
        (BERLIN, date(2024, 3, 31), "0,15,30,45 2 * * *", [utc(2024, 3, 31, 1, 0)]),
        (BERLIN, date(2024, 3, 31), "30 2,3 * * *",
         [utc(2024, 3, 31, 1, 0), utc(2024, 3, 31, 1, 30)]),
        (NEW_YORK, date(2024, 3, 10), "0 2,3 * * *", [utc(2024, 3, 10, 7, 0)]),
        (LORD_HOWE, date(2024, 10, 6), "0,15 2 * * *", [utc(2024, 10, 5, 15, 30)]),
        (LORD_HOWE, date(2024, 10, 6), "*/15 2 * * *",
         [utc(2024, 10, 5, 15, 30), utc(2024, 10, 5, 15, 45)]),
        (SANTIAGO, date(2024, 9, 8), "0 0,1 * * *", [utc(2024, 9, 8, 4, 0)]),
        (SANTIAGO, date(2024, 9, 8), "*/20 0 * * *", [utc(2024, 9, 8, 4, 0)]),
    ],
)
def test_fixed_times_inside_one_gap_collapse_into_one_fire(
    zone: str, day: date, expression: str, expected: list[datetime]
) -> None:
    assert fires_on(expression, zone, day) == expected


@pytest.mark.parametrize(
    ("zone", "day", "expression", "expected"),
    [
        (BERLIN, date(2024, 10, 27), "30 2 * * *", [utc(2024, 10, 27, 0, 30)]),
        (BERLIN, date(2024, 10, 27), "0,30 2 * * *",
         [utc(2024, 10, 27, 0, 0), utc(2024, 10, 27, 0, 30)]),
        (NEW_YORK, date(2024, 11, 3), "30 1 * * *", [utc(2024, 11, 3, 5, 30)]),
        (LORD_HOWE, date(2024, 4, 7), "45 1 * * *", [utc(2024, 4, 6, 14, 45)]),
        (SANTIAGO, date(2024, 4, 6), "30 23 * * *", [utc(2024, 4, 7, 2, 30)]),
        (HAVANA, date(2024, 11, 3), "0 0 * * *", [utc(2024, 11, 3, 4, 0)]),
        (HAVANA, date(2024, 11, 3), "@midnight", [utc(2024, 11, 3, 4, 0)]),
    ],
)
def test_fixed_time_in_repeated_hour_runs_at_first_occurrence_only(
    zone: str, day: date, expression: str, expected: list[datetime]
) -> None:
    assert fires_on(expression, zone, day) == expected


@pytest.mark.parametrize(
    ("zone", "day", "expression", "expected"),
    [
        (BERLIN, date(2024, 3, 31), "30 1 * * *", utc(2024, 3, 31, 0, 30)),
        (BERLIN, date(2024, 3, 31), "30 3 * * *", utc(2024, 3, 31, 1, 30)),
        (BERLIN, date(2024, 10, 27), "30 3 * * *", utc(2024, 10, 27, 2, 30)),
        (BERLIN, date(2024, 10, 27), "30 1 * * *", utc(2024, 10, 26, 23, 30)),
        (NEW_YORK, date(2024, 3, 10), "30 1 * * *", utc(2024, 3, 10, 6, 30)),
        (NEW_YORK, date(2024, 3, 10), "30 3 * * *", utc(2024, 3, 10, 7, 30)),
        (NEW_YORK, date(2024, 11, 3), "30 2 * * *", utc(2024, 11, 3, 7, 30)),
        (NEW_YORK, date(2024, 11, 3), "30 0 * * *", utc(2024, 11, 3, 4, 30)),
        (LORD_HOWE, date(2024, 10, 6), "0 1 * * *", utc(2024, 10, 5, 14, 30)),
        (LORD_HOWE, date(2024, 10, 6), "45 2 * * *", utc(2024, 10, 5, 15, 45)),
        (LORD_HOWE, date(2024, 4, 7), "0 1 * * *", utc(2024, 4, 6, 14, 0)),
        (LORD_HOWE, date(2024, 4, 7), "0 2 * * *", utc(2024, 4, 6, 15, 30)),
        (SANTIAGO, date(2024, 9, 8), "30 1 * * *", utc(2024, 9, 8, 4, 30)),
        (SANTIAGO, date(2024, 9, 7), "0 23 * * *", utc(2024, 9, 8, 3, 0)),
        (SANTIAGO, date(2024, 4, 6), "30 22 * * *", utc(2024, 4, 7, 1, 30)),
        (SANTIAGO, date(2024, 4, 7), "0 0 * * *", utc(2024, 4, 7, 4, 0)),
        (HAVANA, date(2024, 3, 10), "0 1 * * *", utc(2024, 3, 10, 5, 0)),
        (HAVANA, date(2024, 11, 3), "0 1 * * *", utc(2024, 11, 3, 6, 0)),
    ],
)
def test_fixed_time_outside_the_transition_keeps_its_usual_offset(
    zone: str, day: date, expression: str, expected: datetime
) -> None:
    assert fires_on(expression, zone, day) == [expected]


@pytest.mark.parametrize(
    ("zone", "day", "count"),
    [
        (BERLIN, date(2024, 3, 31), 46),
        (BERLIN, date(2024, 10, 27), 50),
        (NEW_YORK, date(2024, 3, 10), 46),
        (NEW_YORK, date(2024, 11, 3), 50),
        (LORD_HOWE, date(2024, 10, 6), 47),  # 23.5 hours
        (LORD_HOWE, date(2024, 4, 7), 49),  # 24.5 hours
        (SANTIAGO, date(2024, 9, 8), 46),
        (SANTIAGO, date(2024, 4, 6), 50),
        (HAVANA, date(2024, 3, 10), 46),
        (HAVANA, date(2024, 11, 3), 50),
        (BERLIN, date(2024, 3, 30), 48),
    ],
)
def test_wildcard_hour_job_fires_at_every_real_occurrence(zone: str, day: date, count: int) -> None:
    fires = fires_on("*/30 * * * *", zone, day)
    assert len(fires) == count
    assert all(later - earlier == timedelta(minutes=30) for earlier, later in pairwise(fires))


@pytest.mark.parametrize(
    ("zone", "day", "repeated"),
    [
        (BERLIN, date(2024, 10, 27), ["02:00+0200", "02:30+0200", "02:00+0100", "02:30+0100"]),
        (NEW_YORK, date(2024, 11, 3), ["01:00-0400", "01:30-0400", "01:00-0500", "01:30-0500"]),
        (LORD_HOWE, date(2024, 4, 7), ["01:30+1100", "01:30+1030"]),
        (SANTIAGO, date(2024, 4, 6), ["23:00-0300", "23:30-0300", "23:00-0400", "23:30-0400"]),
        (HAVANA, date(2024, 11, 3), ["00:00-0400", "00:30-0400", "00:00-0500", "00:30-0500"]),
    ],
)
def test_wildcard_hour_job_fires_twice_in_the_repeated_hour(
    zone: str, day: date, repeated: list[str]
) -> None:
    seen = local_times(fires_on("*/30 * * * *", zone, day), zone)
    start = seen.index(repeated[0])
    assert seen[start:start + len(repeated)] == repeated


@pytest.mark.parametrize(
    ("zone", "day", "around"),
    [
        (BERLIN, date(2024, 3, 31), ["01:00+0100", "01:30+0100", "03:00+0200", "03:30+0200"]),
        (NEW_YORK, date(2024, 3, 10), ["01:00-0500", "01:30-0500", "03:00-0400", "03:30-0400"]),
        (LORD_HOWE, date(2024, 10, 6), ["01:30+1030", "02:30+1100"]),
        (SANTIAGO, date(2024, 9, 8), ["01:00-0300", "01:30-0300"]),
        (HAVANA, date(2024, 3, 10), ["01:00-0400", "01:30-0400"]),
    ],
)
def test_wildcard_hour_job_skips_the_times_inside_the_gap(
    zone: str, day: date, around: list[str]
) -> None:
    seen = local_times(fires_on("*/30 * * * *", zone, day), zone)
    start = seen.index(around[0])
    assert seen[start:start + len(around)] == around
    if around[0].startswith("01:00") and zone in (SANTIAGO, HAVANA):
        assert start == 0  # local midnight and 00:30 do not exist on this day


def test_hourly_job_fires_23_and_25_times_on_transition_days() -> None:
    assert len(fires_on("0 * * * *", BERLIN, date(2024, 3, 31))) == 23
    assert len(fires_on("@hourly", BERLIN, date(2024, 10, 27))) == 25


def test_step_in_the_hour_field_counts_as_wildcard() -> None:
    for expression in ("30 1/2 * * *", "30 1-23/2 * * *", "30 1-3/1 * * *"):
        fires = fires_on(expression, NEW_YORK, date(2024, 11, 3))
        assert fires[:2] == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 3, 6, 30)], expression
    assert fires_on("30 2/2 * * *", NEW_YORK, date(2024, 3, 10))[0] == utc(2024, 3, 10, 8, 30)


@pytest.mark.parametrize(
    ("zone", "expression", "start", "expected"),
    [
        (BERLIN, "30 2 * * *", utc(2024, 3, 29, 12),
         [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 30)]),
        (BERLIN, "30 2 * * *", utc(2024, 10, 25, 12),
         [utc(2024, 10, 26, 0, 30), utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)]),
        (SANTIAGO, "@daily", utc(2024, 9, 6, 12),
         [utc(2024, 9, 7, 4, 0), utc(2024, 9, 8, 4, 0), utc(2024, 9, 9, 3, 0)]),
        (SANTIAGO, "30 23 * * *", utc(2024, 4, 5, 12),
         [utc(2024, 4, 6, 2, 30), utc(2024, 4, 7, 2, 30), utc(2024, 4, 8, 3, 30)]),
        (HAVANA, "@daily", utc(2024, 11, 1, 12),
         [utc(2024, 11, 2, 4, 0), utc(2024, 11, 3, 4, 0), utc(2024, 11, 4, 5, 0)]),
        (LORD_HOWE, "15 2 * * *", utc(2024, 10, 4, 0),
         [utc(2024, 10, 4, 15, 45), utc(2024, 10, 5, 15, 30), utc(2024, 10, 6, 15, 15)]),
    ],
)
def test_fixed_time_job_runs_once_a_day_through_the_transition(
    zone: str, expression: str, start: datetime, expected: list[datetime]
) -> None:
    assert parse_schedule(expression, zone).upcoming(start, 3) == expected


def test_fire_key_of_the_gap_day_is_the_transition_instant() -> None:
    schedule = parse_schedule("30 2 * * *", BERLIN)
    assert schedule.latest_at_or_before(utc(2024, 3, 31, 0, 59, 59)) == utc(2024, 3, 30, 1, 30)
    assert schedule.latest_at_or_before(utc(2024, 3, 31, 1, 0)) == utc(2024, 3, 31, 1, 0)
    assert schedule.latest_at_or_before(utc(2024, 3, 31, 23)) == utc(2024, 3, 31, 1, 0)


def test_repeated_hour_across_midnight_keeps_the_fires_of_both_local_days_in_order() -> None:
    # St. John's turned its clocks back at 00:01 until 2011: on 2010-11-07 the wall clock went
    # from 00:01 NDT back to 23:01 NST on the 6th, so 23:30 (6th) and 00:00 (7th) happened twice.
    schedule = parse_schedule("*/30 * * * *", "America/St_Johns")
    assert schedule.between(utc(2010, 11, 7, 1, 45), utc(2010, 11, 7, 3, 45)) == [
        utc(2010, 11, 7, 2, 0), utc(2010, 11, 7, 2, 30), utc(2010, 11, 7, 3, 0),
        utc(2010, 11, 7, 3, 30)]
    assert schedule.next_after(utc(2010, 11, 7, 2, 15)) == utc(2010, 11, 7, 2, 30)
    assert schedule.latest_at_or_before(utc(2010, 11, 7, 2, 45)) == utc(2010, 11, 7, 2, 30)
    every_minute = parse_schedule("* * * * *", "America/St_Johns").upcoming(utc(2010, 11, 6), 3000)
    assert all(later - earlier == timedelta(minutes=1) for earlier, later in pairwise(every_minute))


def test_skipped_whole_day_runs_a_fixed_time_job_once_when_the_clock_resumes() -> None:
    # Samoa skipped 2011-12-30: 23:59:59 on the 29th (-10) was followed by 00:00 on the 31st (+14).
    noon = parse_schedule("0 12 * * *", "Pacific/Apia")
    assert noon.upcoming(utc(2011, 12, 28, 12), 4) == [
        utc(2011, 12, 28, 22), utc(2011, 12, 29, 22), utc(2011, 12, 30, 10), utc(2011, 12, 30, 22)]
    midnight = parse_schedule("@daily", "Pacific/Apia")  # the 30th and the 31st share one instant
    assert midnight.between(utc(2011, 12, 28, 12), utc(2012, 1, 1)) == [
        utc(2011, 12, 29, 10), utc(2011, 12, 30, 10), utc(2011, 12, 31, 10)]


def test_every_ignores_daylight_saving_time() -> None:
    hourly = parse_schedule("@every 1h", BERLIN)
    fires = hourly.between(utc(2024, 10, 26, 22), utc(2024, 10, 27, 22))
    assert len(fires) == 24
    assert fires[0] == utc(2024, 10, 26, 23)


def local_span(zone: str, first: date, last: date) -> tuple[datetime, datetime]:
    """``(start, end]`` holding exactly the local days ``first`` to ``last``."""
    second = timedelta(seconds=1)
    begin = datetime(first.year, first.month, first.day, tzinfo=ZoneInfo(zone))
    after = datetime(last.year, last.month, last.day, tzinfo=ZoneInfo(zone)) + timedelta(days=1)
    return begin - second, after - second


@pytest.mark.parametrize(
    ("zone", "expression", "first", "last", "expected"),
    [
        (BERLIN, "* * * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 1440),  # -60 +60
        (LORD_HOWE, "* * * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 1440),  # -30 +30
        (NEW_YORK, "*/30 * * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 48),
        (SANTIAGO, "*/15 * * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 96),
        (BERLIN, "30 2 * * *", date(2024, 1, 1), date(2024, 12, 31), 366),  # fixed: once a day
        (SANTIAGO, "*/15 23 * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 4),
        (NEW_YORK, "* 2 * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 60 - 59),  # collapse
        (HAVANA, "* 0 * * *", date(2024, 1, 1), date(2024, 12, 31), 366 * 60 - 59),
        # Samoa skipped 2011-12-30: its 00:00 and 12:00 collapse onto the 31st's 00:00
        ("Pacific/Apia", "0 0,12 * * *", date(2011, 12, 1), date(2012, 1, 31), 62 * 2 - 2),
        # St. John's repeated 23:01-00:01 across midnight on 2010-11-06/07: 23:30 and 00:00 twice
        ("America/St_Johns", "*/30 * * * *", date(2010, 11, 1), date(2010, 11, 30), 30 * 48 + 2),
    ],
)
def test_count_between_counts_every_fire_of_the_transition_days_once(
    zone: str, expression: str, first: date, last: date, expected: int
) -> None:
    schedule = parse_schedule(expression, zone)
    start, end = local_span(zone, first, last)
    assert schedule.count_between(start, end) == expected
    assert len(schedule.between(start, end)) == expected
