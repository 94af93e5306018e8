"""Schedules: cron expressions, descriptors and ``@every``, and the fire times they produce.

A schedule turns an expression and an IANA time zone into a strictly increasing sequence of fire
times: aware UTC datetimes in whole seconds. Every replica derives the same sequence, so a fire
time names one occurrence of a job.

Daylight saving time:

* a job at a fixed local time (the hour field is neither ``*`` nor a step) runs exactly once on
  both transition days. A time the clock skips runs at the first valid instant after the gap
  (several skipped times collapse into that one instant); a time the clock repeats runs at its
  first occurrence only;
* a job whose hour field is ``*`` or a step (``*/2``, ``1-23/2``, ``3/4``) runs at every real
  occurrence: twice in a repeated hour, never in a skipped one.

``@every <duration>`` fires at the Unix epoch plus whole multiples of the duration, whatever the
time zone. Cron fields follow the usual rule for days: when both day-of-month and day-of-week are
restricted (neither is ``*``), a day matches if either matches.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cached_property, lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from claimsched.errors import InvalidSchedule, UnknownTimeZone

__all__ = ["Schedule", "parse_duration", "parse_schedule", "validate_time_zone"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_SECOND = timedelta(seconds=1)
_DAY = 86_400
# Feb 29 can be 8 years from the previous one (2096 -> 2104): scan a bit further, then give up.
_HORIZON_DAYS = 9 * 366
# Keep one day clear of date.min/date.max so local and UTC conversions stay in range.
_FIRST_ORDINAL = date.min.toordinal() + 1
_LAST_ORDINAL = date.max.toordinal() - 1

_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))  # day-of-week: 0 and 7 are Sunday
_OPEN_HIGH = (59, 23, 31, 12, 6)  # where '*' and 'a/n' end
_MONTHS = {name: n for n, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
_WEEKDAYS = {name: n for n, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_NAMES: tuple[dict[str, int], ...] = ({}, {}, {}, _MONTHS, _WEEKDAYS)
_NAME_HINTS = ("", "", "", " or month name (JAN-DEC)", " or day name (SUN-SAT)")
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
_ITEM = re.compile(r"(?P<start>\*|[0-9A-Za-z]+)(?:-(?P<end>[0-9A-Za-z]+))?(?:/(?P<step>[0-9]+))?")
_DURATION = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_DURATION_UNITS = (_DAY, 3600, 60, 1)
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


def validate_time_zone(name: str) -> ZoneInfo:
    """The zone for an IANA time zone name, or UnknownTimeZone naming it."""
    if not isinstance(name, str) or _ZONE_NAME.fullmatch(name) is None:
        raise UnknownTimeZone(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as error:
        raise UnknownTimeZone(f"unknown time zone {name!r}") from error


def parse_duration(text: str) -> timedelta:
    """A duration such as ``10s``, ``1h30m`` or ``2d``: whole seconds, at least one."""
    try:
        return timedelta(seconds=_duration_seconds(text))
    except ValueError as error:
        raise InvalidSchedule(f"invalid duration {text!r}: {error}", field="@every") from None


def parse_schedule(expression: str, time_zone: str = "UTC") -> Schedule:
    """Parse a cron expression, a descriptor or ``@every <duration>`` in an IANA time zone."""
    return Schedule(expression, time_zone)


@dataclass(frozen=True)
class _Every:
    seconds: int


@dataclass(frozen=True)
class _Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    either_day: bool  # both day fields restricted: a day matches if either matches
    fixed_time: bool  # hour field neither '*' nor a step: once per local time on DST days
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashed once: every day's fires are looked up in a cache keyed by the rule.
        object.__setattr__(self, "_hash", hash((self.minutes, self.hours, self.days, self.months,
                                                self.weekdays, self.either_day, self.fixed_time)))

    def __hash__(self) -> int:
        return self._hash

    def matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = day.isoweekday() % 7 in self.weekdays
        return in_month or in_week if self.either_day else in_month and in_week


@dataclass(frozen=True)
class Schedule:
    """When a job fires: an expression (stripped) in an IANA time zone. Immutable, hashable."""

    expression: str
    time_zone: str = "UTC"
    _rule: _Cron | _Every = field(init=False, repr=False, compare=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        expression = self.expression.strip()
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "_rule", _parse_rule(expression))
        object.__setattr__(self, "_zone", validate_time_zone(self.time_zone))

    def next_after(self, t: datetime) -> datetime | None:
        """The first fire time strictly after ``t``; None if it never fires again."""
        return _instant(self._next(_seconds(t)))

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        """The last fire time at or before ``t``: the fire key of the period containing ``t``."""
        return _instant(self._latest(_seconds(t)))

    def between(self, start: datetime, end: datetime, limit: int | None = None) -> list[datetime]:
        """Fire times in ``(start, end]``, ascending; with a limit, only the latest ``limit``."""
        low, high = _seconds(start), _seconds(end)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        if high <= low or limit == 0:
            return []
        if isinstance(self._rule, _Every):
            step = self._rule.seconds
            first, last = low // step + 1, high // step
            if limit is not None:
                first = max(first, last - limit + 1)
            found = [k * step for k in range(first, last + 1)]
        else:
            found = self._cron_between(low, high, limit)
        return [fire for fire in map(_instant, found) if fire is not None]

    def count_between(self, start: datetime, end: datetime) -> int:
        """How many fire times ``(start, end]`` holds: ``len(between(start, end))``, without
        building them."""
        low, high = _seconds(start), _seconds(end)
        if high <= low:
            return 0
        if isinstance(self._rule, _Every):
            return high // self._rule.seconds - low // self._rule.seconds
        return len(self._cron_between(low, high, None))

    def upcoming(self, t: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times after ``t`` (fewer if the schedule ends)."""
        at = _seconds(t)
        if count <= 0:
            return []
        if isinstance(self._rule, _Every):
            step = self._rule.seconds
            found = [(at // step + k) * step for k in range(1, count + 1)]
        else:
            found = self._cron_upcoming(at, count)
        fires: list[datetime] = []
        for fire in map(_instant, found):
            if fire is None:
                return fires
            fires.append(fire)
        nxt: int | None = found[-1] if found else at
        while len(fires) < count and nxt is not None:  # sparse: beyond one scan's horizon
            nxt = self._next(nxt)
            fire = _instant(nxt)
            if fire is None:
                break
            fires.append(fire)
        return fires

    @cached_property
    def period_hint(self) -> timedelta:
        """A typical interval between fires, to size sleeps: exact for ``@every``, else the
        smallest gap between consecutive fires by the calendar (ignoring DST)."""
        if isinstance(self._rule, _Every):
            return timedelta(seconds=self._rule.seconds)
        cron = self._rule
        times = sorted(hour * 60 + minute for hour in cron.hours for minute in cron.minutes)
        reference = date(2000, 1, 1).toordinal()
        days = [day for day in range(reference, reference + _HORIZON_DAYS)
                if cron.matches(date.fromordinal(day))]
        day_gap = min((b - a for a, b in pairwise(days)), default=_HORIZON_DAYS)
        gaps = [b - a for a, b in pairwise(times)]
        gaps.append(day_gap * 1440 + times[0] - times[-1])
        return timedelta(minutes=min(gaps))

    def _next(self, at: int) -> int | None:
        if isinstance(self._rule, _Every):
            return (at // self._rule.seconds + 1) * self._rule.seconds
        # Fires of one local day can reach into the next (a gap across midnight, a repeated hour
        # across midnight): start a day early and look one day past the first hit.
        best: int | None = None
        ordinal = max(self._local_ordinal(at) - 1, _FIRST_ORDINAL)
        stop = min(ordinal + _HORIZON_DAYS, _LAST_ORDINAL)
        while ordinal <= stop:
            fires = self._fires(ordinal)
            index = bisect_right(fires, at)
            if index < len(fires):
                best = fires[index] if best is None else min(best, fires[index])
                stop = min(stop, ordinal + 1)
            ordinal += 1
        return best

    def _cron_upcoming(self, at: int, count: int) -> list[int]:
        """Up to ``count`` first fires after ``at`` within one horizon, in one scan of days: as
        in `_next`, start a day early and look one day past the day that completes them."""
        found: set[int] = set()
        ordinal = max(self._local_ordinal(at) - 1, _FIRST_ORDINAL)
        stop = min(ordinal + _HORIZON_DAYS, _LAST_ORDINAL)
        while ordinal <= stop:
            fires = self._fires(ordinal)
            found.update(fires[bisect_right(fires, at):])
            if len(found) >= count:
                stop = min(stop, ordinal + 1)
            ordinal += 1
        return sorted(found)[:count]

    def _latest(self, at: int) -> int | None:
        if isinstance(self._rule, _Every):
            return at // self._rule.seconds * self._rule.seconds
        best: int | None = None
        ordinal = min(self._local_ordinal(at) + 1, _LAST_ORDINAL)
        stop = max(ordinal - _HORIZON_DAYS, _FIRST_ORDINAL)
        while ordinal >= stop:
            fires = self._fires(ordinal)
            index = bisect_right(fires, at)
            if index:
                best = fires[index - 1] if best is None else max(best, fires[index - 1])
                stop = max(stop, ordinal - 1)
            ordinal -= 1
        return best

    def _cron_between(self, low: int, high: int, limit: int | None) -> list[int]:
        found: set[int] = set()
        ordinal = min(self._local_ordinal(high) + 1, _LAST_ORDINAL)
        stop = max(self._local_ordinal(low) - 1, _FIRST_ORDINAL)
        while ordinal >= stop:
            fires = self._fires(ordinal)
            found.update(fires[bisect_right(fires, low):bisect_right(fires, high)])
            if limit is not None and len(found) >= limit:
                stop = max(stop, ordinal - 1)  # one more day: adjacent days may interleave
            ordinal -= 1
        ordered = sorted(found)
        return ordered if limit is None else ordered[-limit:]

    def _fires(self, ordinal: int) -> tuple[int, ...]:
        """The sorted UTC fire instants (epoch seconds) of one local calendar day."""
        assert isinstance(self._rule, _Cron)
        if not self._rule.matches(date.fromordinal(ordinal)):
            return ()
        return _day_fires(self._rule, self._zone, ordinal)

    def _local_ordinal(self, at: int) -> int:
        try:
            return (_EPOCH + timedelta(seconds=at)).astimezone(self._zone).toordinal()
        except OverflowError:
            return _LAST_ORDINAL if at > 0 else _FIRST_ORDINAL


@lru_cache(maxsize=256)
def _day_fires(cron: _Cron, zone: ZoneInfo, ordinal: int) -> tuple[int, ...]:
    """The sorted, distinct UTC fire instants (epoch seconds) of one local calendar day."""
    day = date.fromordinal(ordinal)
    midnight = (ordinal - _EPOCH_ORDINAL) * _DAY
    first, last = cron.minutes[0], cron.minutes[-1]
    fires: set[int] = set()
    for hour in cron.hours:
        opening, closing = _offsets(zone, day, hour, first), _offsets(zone, day, hour, last)
        if opening[0] == opening[1] == closing[0] == closing[1]:  # no transition in this hour
            base = midnight + hour * 3600 - opening[0]
            fires.update(base + minute * 60 for minute in cron.minutes)
            continue
        for minute in cron.minutes:
            wall = midnight + hour * 3600 + minute * 60
            earlier, later = _offsets(zone, day, hour, minute)
            if earlier == later:
                fires.add(wall - earlier)
            elif earlier > later:  # the clock was turned back over this time: it happens twice
                fires.add(wall - earlier)
                if not cron.fixed_time:
                    fires.add(wall - later)
            elif cron.fixed_time:  # the clock jumped over this time: run when the gap ends
                fires.add(_gap_end(zone, wall - later, wall - earlier))
    return tuple(sorted(fires))


def _offsets(zone: ZoneInfo, day: date, hour: int, minute: int) -> tuple[int, int]:
    """UTC offsets in seconds of a local wall time read with fold=0 and with fold=1 (PEP 495).

    Equal: the time exists once. fold=0 larger: the time is repeated (fall back).
    fold=0 smaller: the time does not exist (spring forward gap)."""
    wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
    return _offset(wall), _offset(wall.replace(fold=1))


def _offset(t: datetime) -> int:
    offset = t.utcoffset()
    return 0 if offset is None else offset // _SECOND


def _gap_end(zone: ZoneInfo, before: int, after: int) -> int:
    """The transition instant in ``(before, after]``: the first second with the new offset."""
    old = _offset((_EPOCH + timedelta(seconds=before)).astimezone(zone))
    while after - before > 1:
        middle = (before + after) // 2
        if _offset((_EPOCH + timedelta(seconds=middle)).astimezone(zone)) == old:
            before = middle
        else:
            after = middle
    return after


def _seconds(t: datetime) -> int:
    if not isinstance(t, datetime):
        raise TypeError(f"expected a datetime, got {type(t).__name__}")
    if t.utcoffset() is None:
        raise ValueError(f"datetime {t.isoformat()} must be timezone-aware")
    return (t - _EPOCH) // _SECOND


def _instant(at: int | None) -> datetime | None:
    if at is None:
        return None
    try:
        return _EPOCH + timedelta(seconds=at)
    except OverflowError:
        return None


def _invalid(expression: str, detail: str, name: str) -> InvalidSchedule:
    return InvalidSchedule(f"invalid schedule {expression!r}: {detail}", field=name)


def _duration_seconds(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise ValueError("use whole numbers with units d, h, m, s, e.g. 10s, 1h30m, 2d")
    seconds = sum(int(n) * unit for n, unit in zip(match.groups("0"), _DURATION_UNITS, strict=True))
    if seconds < 1:
        raise ValueError("the duration must be at least 1s")
    if seconds > timedelta.max // _SECOND:
        raise ValueError("the duration is too long")
    return seconds


@lru_cache(maxsize=1024)
def _parse_rule(expression: str) -> _Cron | _Every:
    """Cached: schedules with the same expression share one rule, and its cached day fires."""
    words = expression.split()
    if not words:
        raise _invalid(expression, "the expression is empty", "expression")
    head = words[0].lower()
    if head == "@every":
        if len(words) != 2:
            raise _invalid(expression, "@every takes one duration, e.g. '@every 10s'", "@every")
        try:
            return _Every(_duration_seconds(words[1]))
        except ValueError as error:
            detail = f"@every duration {words[1]!r} is not valid: {error}"
            raise _invalid(expression, detail, "@every") from None
    if head.startswith("@"):
        if head not in _DESCRIPTORS:
            known = ", ".join([*_DESCRIPTORS, "@every <duration>"])
            raise _invalid(expression, f"unknown descriptor {words[0]!r} (use {known})",
                           "descriptor")
        if len(words) != 1:
            raise _invalid(expression, f"descriptor {words[0]!r} takes no fields", "descriptor")
        words = _DESCRIPTORS[head].split()
    if len(words) != 5:
        detail = f"expected 5 fields ({' '.join(_FIELDS)}), got {len(words)}"
        raise _invalid(expression, detail, "expression")
    minutes, hours, days, months, weekdays = (
        _parse_field(expression, index, text) for index, text in enumerate(words))
    cron = _Cron(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(day % 7 for day in weekdays),
        either_day=words[2] != "*" and words[4] != "*",
        fixed_time=words[1] != "*" and "/" not in words[1],
    )
    if words[4] == "*" and not any(day <= _LONGEST_MONTH[month - 1]
                                   for month in months for day in days):
        detail = f"never fires: day-of-month {words[2]!r} does not occur in month {words[3]!r}"
        raise _invalid(expression, detail, "day-of-month")
    return cron


def _parse_field(expression: str, index: int, text: str) -> set[int]:
    name, (low, high), names = _FIELDS[index], _BOUNDS[index], _NAMES[index]
    open_high = _OPEN_HIGH[index]

    def bad(problem: str) -> InvalidSchedule:
        return _invalid(expression, f"{name} field {text!r} {problem}", name)

    def value(token: str) -> int:
        if token.isascii() and token.isdigit():
            number = int(token)
        elif token.upper() in names:
            number = names[token.upper()]
        else:
            raise bad(f"has {token!r}, not a number{_NAME_HINTS[index]}")
        if not low <= number <= high:
            raise bad(f"is out of range {low}-{high}")
        return number

    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise bad("is not valid: use *, a number, a-b, */n, a-b/n, a/n or a list a,b,c")
        start, end, step = match.group("start", "end", "step")
        if start == "*" and end is not None:
            raise bad("is not valid: '*' cannot start a range")
        first = low if start == "*" else value(start)
        last = first if end is None else value(end)
        if end is None and (start == "*" or step):
            last = max(first, open_high)
        if first > last:
            raise bad(f"has a range that runs backwards ({item})")
        if step is not None and int(step) < 1:
            raise bad("has a step of 0; use 1 or more")
        values.update(range(first, last + 1, int(step or 1)))
    return values
