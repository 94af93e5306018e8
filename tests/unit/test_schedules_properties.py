"""Properties of fire times, drawn around the DST transitions of 2024-2027 (hypothesis).

The fire key of a period is stable, next/latest/between agree with each other, fire times strictly
increase, and on transition days cron jobs fire exactly where a brute-force minute-by-minute walk
of the local clock says they should.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import UTC, date, datetime, timedelta
from functools import cache
from itertools import accumulate, pairwise
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from claimsched.errors import InvalidSchedule
from claimsched.schedule.schedules import Schedule, parse_schedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = 86_400
MICROSECOND = timedelta(microseconds=1)
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
         "America/Havana", "Pacific/Chatham", "Asia/Kolkata"]
DST_ZONES = [zone for zone in ZONES if zone not in ("UTC", "Asia/Kolkata")]
FIRST, LAST = (int((datetime(year, 1, 1, tzinfo=UTC) - EPOCH).total_seconds())
               for year in (2024, 2028))

quick = settings(max_examples=120, deadline=None, database=None)


def instant(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


@cache
def transitions(zone_name: str) -> tuple[int, ...]:
    """The instants (epoch seconds) at which the zone's UTC offset changed in 2024-2027."""
    zone = ZoneInfo(zone_name)

    def offset(seconds: int) -> timedelta | None:
        return instant(seconds).astimezone(zone).utcoffset()

    found = []
    for day in range(FIRST, LAST, DAY):
        before, after = day, day + DAY
        if offset(before) != offset(after):
            while after - before > 1:
                middle = (before + after) // 2
                before, after = (middle, after) if offset(middle) == offset(before) else (
                    before, middle)
            found.append(after)
    return tuple(found)


def test_every_dst_zone_has_two_transitions_a_year() -> None:
    for zone in DST_ZONES:
        assert len(transitions(zone)) == 8, zone


def cron_field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    span = st.tuples(number, number).map(sorted)
    step = st.integers(1, max(2, (high - low) // 2))
    item = st.one_of(
        number.map(str),
        span.map(lambda pair: f"{pair[0]}-{pair[1]}"),
        step.map(lambda n: f"*/{n}"),
        st.tuples(span, step).map(lambda pair: f"{pair[0][0]}-{pair[0][1]}/{pair[1]}"),
        st.tuples(number, step).map(lambda pair: f"{pair[0]}/{pair[1]}"),
    )
    return st.one_of(st.just("*"), item, st.lists(item, min_size=2, max_size=3).map(",".join))


def parses(expression: str) -> bool:
    try:
        parse_schedule(expression)
    except InvalidSchedule:
        return False
    return True


crons = st.tuples(
    cron_field(0, 59), cron_field(0, 23), st.one_of(st.just("*"), cron_field(1, 31)),
    st.one_of(st.just("*"), cron_field(1, 12)), st.one_of(st.just("*"), cron_field(0, 7)),
).map(" ".join).filter(parses)
everies = st.one_of(
    st.integers(1, 3 * DAY).map(lambda seconds: f"@every {seconds}s"),
    st.tuples(st.integers(0, 3), st.integers(1, 59)).map(lambda hm: f"@every {hm[0]}h{hm[1]}m"),
)
expressions = st.one_of(crons, crons, everies, st.sampled_from(["@hourly", "@daily", "@weekly"]))


@st.composite
def cases(draw: st.DrawFn, expression: st.SearchStrategy[str] = expressions) -> tuple[
        Schedule, datetime]:
    """A schedule in some zone and an instant, often within two days of one of its transitions."""
    zone = draw(st.sampled_from(ZONES))
    nearby = transitions(zone)
    if draw(st.booleans()) and nearby:
        seconds = draw(st.sampled_from(nearby)) + draw(st.integers(-2 * DAY, 2 * DAY))
    else:
        seconds = draw(st.integers(FIRST, LAST))
    micro = draw(st.one_of(st.just(0), st.integers(0, 999_999)))
    return parse_schedule(draw(expression), zone), instant(seconds) + micro * MICROSECOND


@quick
@given(cases(), st.integers(0, 999))
def test_fire_key_is_stable_within_a_period(
    case: tuple[Schedule, datetime], per_mille: int
) -> None:
    schedule, t1 = case
    key, following = schedule.latest_at_or_before(t1), schedule.next_after(t1)
    assert following is not None
    t2 = t1 + (following - t1) // MICROSECOND * per_mille // 1000 * MICROSECOND
    assert key is None or key <= t1 <= t2 < following
    assert schedule.latest_at_or_before(t2) == key
    assert schedule.next_after(t2) == following


@quick
@given(cases())
def test_next_fire_is_after_t_and_is_its_own_fire_key(case: tuple[Schedule, datetime]) -> None:
    schedule, t = case
    following, key = schedule.next_after(t), schedule.latest_at_or_before(t)
    assert following is not None and following > t
    assert schedule.latest_at_or_before(following) == following
    assert schedule.latest_at_or_before(following - MICROSECOND) == key
    if key is not None:
        assert key <= t
        assert schedule.next_after(key) == following


@quick
@given(cases(), st.integers(0, 36 * 3600), st.integers(1, 5))
def test_between_equals_stepping_with_next_after(
    case: tuple[Schedule, datetime], length: int, limit: int
) -> None:
    schedule, start = case
    end = start + timedelta(seconds=length)
    stepped: list[datetime] = []
    fire = schedule.next_after(start)
    while fire is not None and fire <= end and len(stepped) < 2000:
        stepped.append(fire)
        fire = schedule.next_after(fire)
    if len(stepped) == 2000:
        end = stepped[-1]
    assert schedule.between(start, end) == stepped
    assert schedule.between(start, end, limit=limit) == stepped[-limit:]
    assert schedule.count_between(start, end) == len(stepped)
    assert schedule.count_between(end, start) == 0


@st.composite
def spans(draw: st.DrawFn) -> tuple[Schedule, datetime, datetime]:
    """A cron schedule and up to two months that often hold one of its zone's transitions."""
    zone = draw(st.sampled_from(ZONES))
    nearby = transitions(zone)
    if draw(st.booleans()) and nearby:
        start = draw(st.sampled_from(nearby)) - draw(st.integers(0, 40 * DAY))
    else:
        start = draw(st.integers(FIRST, LAST))
    end = start + draw(st.integers(0, 60 * DAY))
    return parse_schedule(draw(crons), zone), instant(start), instant(end)


@settings(max_examples=60, deadline=None, database=None)
@given(spans())
def test_count_between_equals_the_number_of_fire_times_over_weeks(
    span: tuple[Schedule, datetime, datetime],
) -> None:
    schedule, start, end = span
    assert schedule.count_between(start, end) == len(schedule.between(start, end))


@quick
@given(cases(), st.integers(0, 40))
def test_upcoming_equals_stepping_with_next_after(
    case: tuple[Schedule, datetime], count: int
) -> None:
    schedule, t = case
    stepped: list[datetime] = []
    fire = schedule.next_after(t)
    while fire is not None and len(stepped) < count:
        stepped.append(fire)
        fire = schedule.next_after(fire)
    assert schedule.upcoming(t, count) == stepped


@quick
@given(cases())
def test_fire_times_strictly_increase_without_duplicates_across_dst_days(
    case: tuple[Schedule, datetime],
) -> None:
    schedule, t = case
    fires = schedule.upcoming(t, 60)
    assert len(fires) == 60
    assert all(earlier < later for earlier, later in pairwise(fires))
    assert all(fire.tzinfo is UTC and fire.microsecond == 0 for fire in fires)
    if not schedule.expression.startswith("@every"):
        assert all(fire.second == 0 for fire in fires)
    for earlier, later in pairwise(fires):
        assert schedule.latest_at_or_before(later - MICROSECOND) == earlier


# --- DST semantics against a brute-force walk of the local clock ------------------------------


@cache
def local_clock(zone_name: str, centre: int) -> tuple[tuple[int, ...], tuple[datetime, ...]]:
    """Every UTC minute within 54 hours of ``centre``, with its local wall time (naive)."""
    zone = ZoneInfo(zone_name)
    minutes = tuple(range(centre - 54 * 3600, centre + 54 * 3600, 60))
    walls = tuple(instant(u).astimezone(zone).replace(tzinfo=None, fold=0) for u in minutes)
    return minutes, walls


@st.composite
def hour_fields(draw: st.DrawFn, fixed: bool) -> tuple[str, set[int]]:
    if fixed:
        hours = draw(st.sets(st.integers(0, 23), min_size=1, max_size=4))
        return ",".join(map(str, sorted(hours))), hours
    step = draw(st.integers(1, 5))
    start = draw(st.integers(0, 4))
    text = draw(st.sampled_from(["*", f"*/{step}", f"{start}/{step}", f"{start}-23/{step}"]))
    first, stride = (0, 1) if text == "*" else (0, step) if text.startswith("*") else (start, step)
    return text, set(range(first, 24, stride))


@st.composite
def dst_cases(draw: st.DrawFn, fixed: bool) -> tuple[Schedule, str, int, set[int], set[int],
                                                     set[int]]:
    zone = draw(st.sampled_from(DST_ZONES))
    centre = draw(st.sampled_from(transitions(zone)))
    minutes = draw(st.sets(st.integers(0, 59), min_size=1, max_size=4))
    hour_text, hours = draw(hour_fields(fixed))
    weekdays = draw(st.one_of(st.none(), st.sets(st.integers(0, 6), min_size=1, max_size=3)))
    week_text = "*" if weekdays is None else ",".join(map(str, sorted(weekdays)))
    expression = f"{','.join(map(str, sorted(minutes)))} {hour_text} * * {week_text}"
    return (parse_schedule(expression, zone), zone, centre, minutes, hours,
            set(range(7)) if weekdays is None else weekdays)


def on_weekday(day: date, weekdays: set[int]) -> bool:
    return day.isoweekday() % 7 in weekdays


@settings(max_examples=80, deadline=None, database=None)
@given(dst_cases(fixed=False))
def test_wildcard_hour_jobs_fire_at_every_real_local_occurrence(
    case: tuple[Schedule, str, int, set[int], set[int], set[int]],
) -> None:
    schedule, zone, centre, minutes, hours, weekdays = case
    low, high = centre - 30 * 3600, centre + 30 * 3600
    expected = [
        instant(u) for u, wall in zip(*local_clock(zone, centre), strict=True)
        if low < u <= high and wall.minute in minutes and wall.hour in hours
        and on_weekday(wall.date(), weekdays)
    ]
    assert schedule.between(instant(low), instant(high)) == expected


@settings(max_examples=80, deadline=None, database=None)
@given(dst_cases(fixed=True))
def test_fixed_time_jobs_fire_once_at_the_first_instant_the_local_clock_reaches_them(
    case: tuple[Schedule, str, int, set[int], set[int], set[int]],
) -> None:
    schedule, zone, centre, minutes, hours, weekdays = case
    low, high = centre - 30 * 3600, centre + 30 * 3600
    clock, walls = local_clock(zone, centre)
    reached = list(accumulate(walls, max))  # the latest wall time the clock has shown so far
    middle = walls[len(walls) // 2].date()
    expected = set()
    for day in (middle + timedelta(days=offset) for offset in range(-3, 4)):
        for hour in hours:
            for minute in minutes:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                index = bisect_left(reached, wall)
                if on_weekday(day, weekdays) and index < len(clock) and low < clock[index] <= high:
                    expected.add(clock[index])
    assert schedule.between(instant(low), instant(high)) == [instant(u) for u in sorted(expected)]
