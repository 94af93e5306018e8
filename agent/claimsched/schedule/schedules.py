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
time zone. The expressions themselves, which days a cron expression names, and how hashed fields
(``H``) take their values from the job name, are in `cron`.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cached_property, lru_cache, partial
from itertools import pairwise
from weakref import WeakValueDictionary
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from claimsched.errors import UnknownTimeZone
from claimsched.schedule.cron import Cron, Every, parse_duration, parse_rule, quoted, resolve

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
# Days of fire times each rule keeps: the few around "now" that next/latest/upcoming revisit.
_DAYS_KEPT = 8

_Fires = Sequence[int]  # the sorted UTC fire instants (epoch seconds) of one local day
_Days = Callable[[int], _Fires]  # a day's fires by its ordinal

_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


def validate_time_zone(name: str) -> ZoneInfo:
    """The zone for an IANA time zone name, or UnknownTimeZone naming it."""
    if not isinstance(name, str):
        raise UnknownTimeZone(f"unknown time zone: expected a string, got {type(name).__name__}")
    if _ZONE_NAME.fullmatch(name) is None:
        raise UnknownTimeZone(f"unknown time zone {quoted(name)}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as error:
        raise UnknownTimeZone(f"unknown time zone {quoted(name)}") from error


def parse_schedule(expression: str, time_zone: str = "UTC", job_name: str | None = None
                   ) -> Schedule:
    """Parse a cron expression, a descriptor or ``@every <duration>`` in an IANA time zone; a
    hashed field (``H``) takes its value from ``job_name``."""
    return Schedule(expression, time_zone, job_name)


@dataclass(frozen=True)
class Schedule:
    """When a job fires: an expression (stripped) in an IANA time zone. Immutable, hashable.

    ``resolved`` is the expression that runs: the same, but with hashed fields (``H``) written
    out for ``job_name``. Schedules with equal expressions and zones are equal when their resolved
expressions are."""

    expression: str
    time_zone: str = "UTC"
    job_name: str | None = field(default=None, compare=False)
    resolved: str = field(init=False)
    _rule: Cron | Every = field(init=False, repr=False, compare=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _days: _Days = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        expression = self.expression
        if isinstance(expression, str):
            expression = expression.strip()
            object.__setattr__(self, "expression", expression)
            object.__setattr__(self, "resolved", resolve(expression, self.job_name))
        rule = parse_rule(self.resolved if isinstance(expression, str) else expression)
        zone = validate_time_zone(self.time_zone)
        object.__setattr__(self, "_rule", rule)
        object.__setattr__(self, "_zone", zone)
        if isinstance(rule, Cron):
            object.__setattr__(self, "_days", _days_of(rule, zone))

    def next_after(self, t: datetime) -> datetime | None:
        """The first fire time strictly after ``t``; None if it never fires again."""
        at = _seconds(t)
        return _instant(self._next(at) if isinstance(self._rule, Every) else _shared_next(self, at))

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        """The last fire time at or before ``t``: the fire key of the period containing ``t``."""
        at = _seconds(t)
        return _instant(self._latest(at) if isinstance(self._rule, Every)
                        else _shared_latest(self, at))

    def between(self, start: datetime, end: datetime, limit: int | None = None) -> list[datetime]:
        """Fire times in ``(start, end]``, ascending; with a limit, only the latest ``limit``."""
        low, high = _seconds(start), _seconds(end)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        if high <= low or limit == 0:
            return []
        if isinstance(self._rule, Every):
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
        if isinstance(self._rule, Every):
            return high // self._rule.seconds - low // self._rule.seconds
        return _shared_count(self, low, high)

    def upcoming(self, t: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times after ``t`` (fewer if the schedule ends)."""
        at = _seconds(t)
        if count <= 0:
            return []
        if isinstance(self._rule, Every):
            step = self._rule.seconds
            found = [(at // step + k) * step for k in range(1, count + 1)]
        else:
            found = list(_shared_upcoming(self, at, count))
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
        if isinstance(self._rule, Every):
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
        if isinstance(self._rule, Every):
            return (at // self._rule.seconds + 1) * self._rule.seconds
        # _Fires of one local day can reach into the next (a gap across midnight, a repeated hour
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
        if isinstance(self._rule, Every):
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

    def _cron_count(self, low: int, high: int) -> int:
        """`len(_cron_between(low, high, None))` without building every fire time: a day well
        inside the range whose clock runs steadily, as do its neighbours', adds minutes x hours.
        The days of the edges, and around a clock change (whose fires may coincide with a
        neighbour's, as when a skipped evening collapses onto the next midnight), count their
        fires one by one."""
        cron = self._rule
        assert isinstance(cron, Cron)
        found: set[int] = set()
        first = max(self._local_ordinal(low) - 1, _FIRST_ORDINAL)
        last = min(self._local_ordinal(high) + 1, _LAST_ORDINAL)
        # A day's fires are within a day (the largest UTC offset) of its wall clock read as UTC.
        inside = range(low // _DAY + 2 + _EPOCH_ORDINAL, high // _DAY - 1 + _EPOCH_ORDINAL)
        zone = self._zone
        per_day, count = len(cron.minutes) * len(cron.hours), 0
        for ordinal in range(first, last + 1):
            if not cron.matches(date.fromordinal(ordinal)):
                continue
            if ordinal in inside and all(_steady(zone, day)
                                         for day in (ordinal - 1, ordinal, ordinal + 1)):
                count += per_day
            else:
                fires = self._days(ordinal)
                found.update(fires[bisect_right(fires, low):bisect_right(fires, high)])
        return count + len(found)

    def _fires(self, ordinal: int) -> _Fires:
        """The sorted UTC fire instants (epoch seconds) of one local calendar day."""
        assert isinstance(self._rule, Cron)
        if not self._rule.matches(date.fromordinal(ordinal)):
            return ()
        return self._days(ordinal)

    def _local_ordinal(self, at: int) -> int:
        try:
            return (_EPOCH + timedelta(seconds=at)).astimezone(self._zone).toordinal()
        except OverflowError:
            return _LAST_ORDINAL if at > 0 else _FIRST_ORDINAL


# Schedules of one expression in one zone (equal Schedules) give the same answers, and many
# jobs ask the same questions (the operator's windows of every job end at one instant): the
# latest answers are shared, whichever job asks.
@lru_cache(maxsize=8192)
def _shared_next(schedule: Schedule, at: int) -> int | None:
    return schedule._next(at)


@lru_cache(maxsize=8192)
def _shared_latest(schedule: Schedule, at: int) -> int | None:
    return schedule._latest(at)


@lru_cache(maxsize=8192)
def _shared_count(schedule: Schedule, low: int, high: int) -> int:
    return schedule._cron_count(low, high)


@lru_cache(maxsize=8192)
def _shared_upcoming(schedule: Schedule, at: int, count: int) -> tuple[int, ...]:
    return tuple(schedule._cron_upcoming(at, count))


def _days_of(cron: Cron, zone: ZoneInfo) -> _Days:
    """The fire instants of a rule in a zone by local day, with a cache of their own: schedules
    never evict each other's days (one cache for all held the days of ~85 schedules), and the
    live schedules of one rule and zone share theirs."""
    days = _LIVE_DAYS.get((cron, zone))
    if days is None:
        days = _LIVE_DAYS[cron, zone] = lru_cache(maxsize=_DAYS_KEPT)(
            partial(_day_fires, cron, zone))
    return days


_LIVE_DAYS: WeakValueDictionary[tuple[Cron, ZoneInfo], _Days] = WeakValueDictionary()


def _day_fires(cron: Cron, zone: ZoneInfo, ordinal: int) -> _Fires:
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
    return array("q", sorted(fires))


@lru_cache(maxsize=8192)  # a zone's days: every schedule of the zone asks about the same ones
def _steady(zone: ZoneInfo, ordinal: int) -> bool:
    """Whether the local clock runs without a jump through a day: one offset at 00:00 and at
    23:59, neither skipped nor repeated. (A change and its reversal within one day would pass
    unseen; the closest offset changes in the time zone database are four days apart.)"""
    day = date.fromordinal(ordinal)
    (start, start_again), (end, end_again) = _offsets(zone, day, 0, 0), _offsets(zone, day, 23, 59)
    return start == start_again == end == end_again


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
