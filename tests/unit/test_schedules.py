"""Parsing schedules and walking their fire times (no DST here: see test_schedules_dst.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from claimsched.errors import InvalidSchedule, UnknownTimeZone
from claimsched.schedule import schedules
from claimsched.schedule.schedules import (
    Schedule,
    parse_duration,
    parse_schedule,
    validate_time_zone,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def minutes_of(expression: str, count: int, start: datetime | None = None) -> list[str]:
    """The next fire times from 2024-01-01 00:00 UTC (a Monday) as 'DD HH:MM'."""
    fires = parse_schedule(expression).upcoming(start or utc(2023, 12, 31, 23, 59), count)
    return [fire.strftime("%d %H:%M") for fire in fires]


# --- syntax -----------------------------------------------------------------------------------


def test_every_minute_fires_at_each_minute() -> None:
    assert minutes_of("* * * * *", 3) == ["01 00:00", "01 00:01", "01 00:02"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("7 * * * *", ["01 00:07", "01 01:07", "01 02:07"]),
        ("5,10-12,*/20 * * * *", ["01 00:00", "01 00:05", "01 00:10", "01 00:11", "01 00:12",
                                   "01 00:20", "01 00:40", "01 01:00"]),
        ("10-30/10 * * * *", ["01 00:10", "01 00:20", "01 00:30", "01 01:10"]),
        ("50/5 * * * *", ["01 00:50", "01 00:55", "01 01:50"]),
        ("0 3/8 * * *", ["01 03:00", "01 11:00", "01 19:00", "02 03:00"]),
        ("0 0 */10 * *", ["01 00:00", "11 00:00", "21 00:00", "31 00:00"]),
        ("*/90 * * * *", ["01 00:00", "01 01:00"]),
        ("05 09 * * *", ["01 09:05", "02 09:05"]),
    ],
)
def test_numbers_ranges_steps_and_lists_select_minutes_hours_and_days(
    expression: str, expected: list[str]
) -> None:
    assert minutes_of(expression, len(expected)) == expected


@pytest.mark.parametrize(
    ("named", "numbered"),
    [
        ("0 0 1 jan,Jul *", "0 0 1 1,7 *"),
        ("0 0 1 FEB-apr *", "0 0 1 2-4 *"),
        ("0 9 * * MON-fri", "0 9 * * 1-5"),
        ("0 9 * * sun,SAT", "0 9 * * 0,6"),
        ("0 9 * * Tue/2", "0 9 * * 2,4,6"),
    ],
)
def test_month_and_day_names_are_case_insensitive_aliases(named: str, numbered: str) -> None:
    start = utc(2024, 1, 1)
    assert parse_schedule(named).upcoming(start, 12) == parse_schedule(numbered).upcoming(start, 12)


@pytest.mark.parametrize("sunday", ["0", "7", "SUN", "5-7", "0-0"])
def test_sunday_is_day_0_and_day_7(sunday: str) -> None:
    fires = parse_schedule(f"0 12 * * {sunday}").upcoming(utc(2024, 1, 1), 10)
    assert date(2024, 1, 7) in {fire.date() for fire in fires}
    assert all(fire.isoweekday() in {5, 6, 7} for fire in fires)


def test_day_of_week_alone_restricts_days_and_day_of_month_alone_too() -> None:
    fridays = parse_schedule("0 0 * * FRI").upcoming(utc(2024, 1, 1), 20)
    assert {fire.isoweekday() for fire in fridays} == {5}
    thirteenths = parse_schedule("0 0 13 * *").upcoming(utc(2024, 1, 1), 20)
    assert {fire.day for fire in thirteenths} == {13}


def test_day_of_month_and_day_of_week_both_restricted_match_either() -> None:
    fires = parse_schedule("0 0 13 * FRI").between(utc(2024, 1, 1), utc(2025, 1, 1))
    days = {fire.date() for fire in fires}
    assert all(day.day == 13 or day.isoweekday() == 5 for day in days)
    assert len(days) == 52 + 12 - 2  # every Friday, every 13th; Sep 13 and Dec 13 are Fridays
    assert date(2024, 2, 13) in days  # a Tuesday
    assert date(2024, 1, 5) in days  # a Friday


def monday(day: date) -> bool:
    return day.isoweekday() == 1


@pytest.mark.parametrize(
    ("expression", "expected"),
    [  # the Kubernetes CronJob rule (robfig/cron v3): an unrestricted day field makes both count
        ("0 0 1 * */1", lambda day: day.day == 1),
        ("0 0 1 * ?", lambda day: day.day == 1),
        ("0 0 1 * 1,*", lambda day: day.day == 1),
        ("0 0 *,15 * 1", monday),
        ("0 0 ? * MON", monday),
        ("0 0 */1 * 1", monday),
        ("0 0 * * */1", lambda day: True),
        ("0 0 ? * ?", lambda day: True),
        # both restricted, either counts: a step over 1, a range or a list without '*'
        ("0 0 */2 * 1", lambda day: day.day % 2 == 1 or monday(day)),
        ("0 0 ?/2 * 1", lambda day: day.day % 2 == 1 or monday(day)),
        ("0 0 1 * */2", lambda day: day.day == 1 or day.isoweekday() in (2, 4, 6, 7)),
        ("0 0 1 * 1-5/1", lambda day: day.day == 1 or day.isoweekday() <= 5),
        ("0 0 1-31 * 1", lambda day: True),
        ("0 0 1,15 * 0-6", lambda day: True),
        ("0 0 1,15 * FRI", lambda day: day.day in (1, 15) or day.isoweekday() == 5),
    ],
)
def test_days_match_as_in_a_kubernetes_cronjob(
    expression: str, expected: Callable[[date], bool]
) -> None:
    every_day = [date(2024, 1, 1) + timedelta(days=n) for n in range(366)]
    fires = parse_schedule(expression).between(utc(2023, 12, 31, 12), utc(2024, 12, 31, 12))
    assert [fire.date() for fire in fires] == [day for day in every_day if expected(day)]


@pytest.mark.parametrize(
    ("descriptor", "cron"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_descriptors_fire_like_their_cron_equivalent(descriptor: str, cron: str) -> None:
    start = utc(2024, 2, 10, 13, 17)
    zone = "Europe/Berlin"
    fires = parse_schedule(descriptor, zone).upcoming(start, 5)
    assert fires == parse_schedule(cron, zone).upcoming(start, 5)


def test_every_is_anchored_at_the_unix_epoch() -> None:
    schedule = parse_schedule("@every 7s", "Asia/Tokyo")
    for start in (utc(2024, 3, 31, 0, 59, 58), utc(1969, 12, 31, 23, 59, 59), utc(2031, 5, 6)):
        for fire in schedule.upcoming(start, 5):
            assert (fire - utc(1970, 1, 1)).total_seconds() % 7 == 0
    assert schedule.next_after(utc(1970, 1, 1)) == utc(1970, 1, 1, 0, 0, 7)
    assert schedule.latest_at_or_before(utc(1970, 1, 1, 0, 0, 13)) == utc(1970, 1, 1, 0, 0, 7)


def test_every_does_not_depend_on_time_zone_or_on_when_anyone_looks() -> None:
    here = parse_schedule("@every 1h30m", "UTC")
    there = parse_schedule("@every 1h30m", "Asia/Kolkata")
    later = here.upcoming(utc(2024, 6, 1, 0, 0, 1), 4)
    assert later == there.upcoming(utc(2024, 6, 1, 0, 44, 59), 4)
    assert later[0] == utc(2024, 6, 1, 1, 30)  # 2024-06-01 is 19875 days, a multiple of 90 min


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10), ("2m", 120), ("1h30m", 5400), ("2d", 172_800), ("1d2h3m4s", 93_784),
     ("90s", 90), ("1s", 1)],
)
def test_durations_take_whole_days_hours_minutes_and_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_schedule(f"@every {text}").period_hint == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "0s", "0h0m", "-5s", "5x", "500ms", "1.5s", "10", "s",
                                  "1m1h", "10 s", "1H"])
def test_bad_durations_are_rejected_naming_every(text: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_duration(text)
    assert caught.value.field == "@every"
    assert repr(text) in str(caught.value)


# --- errors -----------------------------------------------------------------------------------


def test_error_message_is_one_line_naming_the_expression_the_field_and_the_value() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule("61 * * * *")
    assert str(caught.value) == (
        "invalid schedule '61 * * * *': minute field '61' is out of range 0-59")
    assert caught.value.field == "minute"


@pytest.mark.parametrize(
    ("expression", "field", "fragment"),
    [
        ("* 24 * * *", "hour", "hour field '24' is out of range 0-23"),
        ("* * 0 * *", "day-of-month", "day-of-month field '0' is out of range 1-31"),
        ("* * * 13 *", "month", "month field '13' is out of range 1-12"),
        ("* * * * 8", "day-of-week", "day-of-week field '8' is out of range 0-7"),
        ("1,61 * * * *", "minute", "minute field '1,61' is out of range 0-59"),
        ("*/0 * * * *", "minute", "step of 0"),
        ("5-2 * * * *", "minute", "runs backwards"),
        ("* * * * FOO", "day-of-week", "'FOO'"),
        ("* * * JANUARY *", "month", "'JANUARY'"),
        ("* MON * * *", "hour", "'MON'"),
        ("1,,2 * * * *", "minute", "minute field '1,,2' is not valid"),
        ("*-5 * * * *", "minute", "'*' cannot start a range"),
        ("a * * * *", "minute", "'a'"),
        ("* * * * *", None, None),
        ("* * * *", "expression",
         "expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
        ("* * * * * *", "expression", "got 6"),
        ("", "expression", "empty"),
        ("@reboot", "descriptor", "unknown descriptor '@reboot'"),
        ("@daily 5", "descriptor", "takes no fields"),
        ("@every", "@every", "@every takes one duration"),
        ("@every 0s", "@every", "'0s'"),
        ("@every 5x", "@every", "'5x'"),
        ("0 0 30 2 *", "day-of-month", "never fires"),
        ("0 0 31 4,6,9,11 *", "day-of-month", "never fires"),
        ("0 0 30 2 */1", "day-of-month", "never fires"),
        ("0 0 30 2 ?", "day-of-month", "never fires"),
        ("? * * * *", "minute", "'?' is only for day-of-month and day-of-week"),
        ("* * * ? *", "month", "'?' is only for day-of-month and day-of-week"),
        ("* * ?-5 * *", "day-of-month", "'?' cannot start a range"),
    ],
)
def test_invalid_expressions_name_the_bad_field_and_value(
    expression: str, field: str | None, fragment: str | None
) -> None:
    if field is None:
        parse_schedule(expression)
        return
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression)
    message = str(caught.value)
    assert caught.value.field == field
    assert message.startswith(f"invalid schedule {expression!r}: ")
    assert fragment is not None and fragment in message
    assert "\n" not in message


@pytest.mark.parametrize("expression", ["0 0 29 2 *", "0 0 30 2 MON", "0 0 31 * *",
                                        "0 0 30 2 */2", "0 0 29 2 ?"])
def test_rare_schedules_are_valid_when_they_can_fire(expression: str) -> None:
    assert parse_schedule(expression).next_after(utc(2024, 3, 1)) is not None


def test_unknown_time_zone_is_named() -> None:
    with pytest.raises(UnknownTimeZone, match=r"^unknown time zone 'Mars/Base'$"):
        validate_time_zone("Mars/Base")
    with pytest.raises(UnknownTimeZone, match="Mars/Base"):
        parse_schedule("* * * * *", "Mars/Base")


@pytest.mark.parametrize(
    "name",
    ["", " ", "../../etc/passwd", "/etc/localtime", "Europe/../Europe/Berlin", "Europe\\Berlin",
     "America", "Europe/Berlin/", "zone.tab", "Europe/Berlin\x00"],
)
def test_empty_and_path_like_time_zone_names_are_rejected(name: str) -> None:
    with pytest.raises(UnknownTimeZone):
        validate_time_zone(name)


def test_validate_time_zone_returns_the_zone() -> None:
    assert validate_time_zone("America/Argentina/Buenos_Aires") == ZoneInfo(
        "America/Argentina/Buenos_Aires")
    assert str(validate_time_zone("Etc/GMT+5")) == "Etc/GMT+5"


# --- the API ----------------------------------------------------------------------------------


def test_schedule_is_immutable_hashable_and_keeps_the_stripped_expression() -> None:
    schedule = parse_schedule("  */5 * * * *\n", "Europe/Berlin")
    assert schedule.expression == "*/5 * * * *"
    assert schedule.time_zone == "Europe/Berlin"
    assert schedule == Schedule("*/5 * * * *", "Europe/Berlin")
    assert hash(schedule) == hash(Schedule("*/5 * * * *", "Europe/Berlin"))
    assert schedule != Schedule("*/5 * * * *", "UTC")
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule.expression = "* * * * *"  # type: ignore[misc]


@pytest.mark.parametrize(
    "call",
    [
        lambda s, t: s.next_after(t),
        lambda s, t: s.latest_at_or_before(t),
        lambda s, t: s.between(t, t),
        lambda s, t: s.between(utc(2024, 1, 1), t),
        lambda s, t: s.upcoming(t, 1),
    ],
)
@pytest.mark.parametrize("expression", ["* * * * *", "@every 10s"])
def test_naive_datetimes_are_rejected(call: object, expression: str) -> None:
    schedule = parse_schedule(expression)
    with pytest.raises(ValueError, match="timezone-aware"):
        call(schedule, datetime(2024, 1, 1))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("expression", "next_fire"),
    [("*/5 * * * *", utc(2024, 5, 1, 3, 35)), ("@every 10s", utc(2024, 5, 1, 3, 32, 10))],
)
def test_outputs_are_whole_seconds_in_utc_whatever_the_input_zone(
    expression: str, next_fire: datetime
) -> None:
    schedule = parse_schedule(expression, "America/New_York")
    t = datetime(2024, 5, 1, 9, 2, 3, 456_789, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    fires = [schedule.next_after(t), schedule.latest_at_or_before(t),
             *schedule.between(t - timedelta(hours=1), t), *schedule.upcoming(t, 3)]
    for fire in fires:
        assert fire is not None
        assert fire.tzinfo is UTC
        assert fire.microsecond == 0
    assert schedule.next_after(t) == next_fire


def test_next_after_is_strictly_after_and_latest_at_or_before_includes_t() -> None:
    schedule = parse_schedule("*/15 * * * *")
    on_time = utc(2024, 1, 1, 10, 15)
    assert schedule.next_after(on_time) == utc(2024, 1, 1, 10, 30)
    assert schedule.latest_at_or_before(on_time) == on_time
    assert schedule.latest_at_or_before(on_time - timedelta(microseconds=1)) == utc(2024, 1, 1, 10)
    assert schedule.next_after(on_time - timedelta(microseconds=1)) == on_time


@pytest.mark.parametrize("expression", ["*/15 * * * *", "@every 15m"])
def test_between_excludes_start_and_includes_end(expression: str) -> None:
    schedule = parse_schedule(expression)
    fires = schedule.between(utc(2024, 1, 1, 10), utc(2024, 1, 1, 11))
    assert fires == [utc(2024, 1, 1, 10, 15), utc(2024, 1, 1, 10, 30), utc(2024, 1, 1, 10, 45),
                     utc(2024, 1, 1, 11)]
    assert schedule.between(utc(2024, 1, 1, 11), utc(2024, 1, 1, 10)) == []


@pytest.mark.parametrize("expression", ["*/15 * * * *", "@every 15m"])
def test_between_with_limit_keeps_only_the_latest_fires_in_order(expression: str) -> None:
    schedule = parse_schedule(expression)
    assert schedule.between(utc(2024, 1, 1), utc(2024, 1, 2), limit=2) == [
        utc(2024, 1, 1, 23, 45), utc(2024, 1, 2)]
    assert schedule.between(utc(2024, 1, 1), utc(2024, 1, 1, 0, 20), limit=5) == [
        utc(2024, 1, 1, 0, 15)]
    assert schedule.between(utc(2024, 1, 1), utc(2024, 1, 2), limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        schedule.between(utc(2024, 1, 1), utc(2024, 1, 2), limit=-1)


def test_between_handles_a_day_of_every_second_and_a_week_of_every_minute() -> None:
    every_second = parse_schedule("@every 1s", "Europe/Berlin")
    day = every_second.between(utc(2024, 3, 30, 12), utc(2024, 3, 31, 12))
    assert len(day) == 86_400
    assert every_second.between(utc(2024, 3, 30), utc(2024, 3, 31), limit=3)[0] == utc(
        2024, 3, 30, 23, 59, 58)
    every_minute = parse_schedule("* * * * *", "Europe/Berlin")
    week = every_minute.between(utc(2024, 3, 28), utc(2024, 4, 4))
    assert len(week) == 7 * 1440  # every real minute, across the Berlin gap of 2024-03-31
    assert every_minute.between(utc(2024, 3, 28), utc(2024, 4, 4), limit=1) == [utc(2024, 4, 4)]


def test_leap_day_schedule_reaches_the_next_leap_year_even_across_2100() -> None:
    schedule = parse_schedule("0 0 29 2 *")
    assert schedule.upcoming(utc(2024, 3, 1), 2) == [utc(2028, 2, 29), utc(2032, 2, 29)]
    assert schedule.upcoming(utc(2090, 3, 1), 4) == [  # beyond one scan's horizon
        utc(2092, 2, 29), utc(2096, 2, 29), utc(2104, 2, 29), utc(2108, 2, 29)]
    assert schedule.next_after(utc(2096, 3, 1)) == utc(2104, 2, 29)
    assert schedule.latest_at_or_before(utc(2104, 2, 28)) == utc(2096, 2, 29)


def test_fire_times_beyond_the_datetime_range_are_none() -> None:
    assert parse_schedule("0 0 29 2 *").latest_at_or_before(utc(1, 1, 2)) is None
    assert parse_schedule("@every 1d").next_after(datetime.max.replace(tzinfo=UTC)) is None
    assert parse_schedule("@every 1d").upcoming(utc(9999, 12, 30), 5) == [utc(9999, 12, 31)]
    assert parse_schedule("* * * * *").next_after(datetime.max.replace(tzinfo=UTC)) is None


def test_upcoming_returns_the_next_count_fire_times() -> None:
    assert minutes_of("0 */6 * * *", 5) == ["01 00:00", "01 06:00", "01 12:00", "01 18:00",
                                           "02 00:00"]
    assert parse_schedule("* * * * *").upcoming(utc(2024, 1, 1), 0) == []


@pytest.mark.parametrize(
    ("expression", "hint"),
    [
        ("@every 90s", timedelta(seconds=90)),
        ("* * * * *", timedelta(minutes=1)),
        ("*/15 * * * *", timedelta(minutes=15)),
        ("0 9,17 * * *", timedelta(hours=8)),
        ("0 22,23 * * *", timedelta(hours=1)),
        ("30 9 * * *", timedelta(days=1)),
        ("0 0 * * MON", timedelta(days=7)),
        ("0 0 * * 1-5", timedelta(days=1)),
        ("0 0 1 * *", timedelta(days=28)),
        ("0 0 29 2 *", timedelta(days=1461)),
    ],
)
def test_period_hint_is_the_smallest_gap_between_fires(expression: str, hint: timedelta) -> None:
    assert parse_schedule(expression, "Europe/Berlin").period_hint == hint


# --- cost -------------------------------------------------------------------------------------


class DaysBuilt:
    """Counts the local days whose fire times a schedule works out (a spy on the real function)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        build = schedules._day_fires

        def counted(*args: Any) -> Any:
            self.count += 1
            return build(*args)

        monkeypatch.setattr(schedules, "_day_fires", counted)


def test_count_between_does_not_build_the_fire_times_of_every_day(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = DaysBuilt(monkeypatch)
    schedule = parse_schedule("*/1 * * * *", "Asia/Tbilisi")
    assert schedule.count_between(utc(2024, 1, 1), utc(2025, 1, 1)) == 366 * 1440
    assert built.count <= 8  # the days at the two edges of the range


def test_many_schedules_keep_their_own_days_without_evicting_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = DaysBuilt(monkeypatch)
    many = [parse_schedule(f"{n % 60} {n // 60} * * *", "Asia/Tbilisi") for n in range(400)]
    now = utc(2024, 6, 1, 12)
    first = [(s.next_after(now), s.latest_at_or_before(now)) for s in many]
    assert built.count >= 400
    built.count = 0
    assert [(s.next_after(now), s.latest_at_or_before(now)) for s in many] == first
    assert built.count == 0
