"""Schedule expressions: 5-field cron, descriptors and ``@every``, parsed into rules.

Day of month and day of week follow the Kubernetes CronJob rule (robfig/cron v3, which a CronJob's
expressions were written for): when either field is unrestricted, a day must match both; when
both are restricted, a day matches if either matches. A field is unrestricted when one of its
items is ``*`` or ``?``, alone or with a step of 1 (``*``, ``?``, ``*/1``, ``*,15``); ``*/2`` and
``1-31`` are restrictions. So ``0 0 1 * */1`` runs on the 1st, ``0 0 *,15 * MON`` on Mondays, and
``0 0 */2 * MON`` on odd days and on Mondays.

Hashed fields (Jenkins and croniter write them so): ``H`` stands for one value derived from the
job's name, ``H(a-b)`` for one within a range, ``H/n`` (and ``H(a-b)/n``) for a step with a hashed
offset in ``[0, n)``. The value comes from sha256 of the job name and the field's index, so every
replica, release and restart derives the same one, and 500 jobs written ``H 2 * * *`` spread over
the hour. `resolve` writes them out as plain fields (``H/15`` -> ``7-59/15``): the resolved
expression is what runs, and what is shown. Bare ``H`` in day-of-month takes 1-28, so it fires in
every month.

Bad input of any kind raises `InvalidSchedule` naming the field, and quotes at most the first
characters of what it was given.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from typing import TypeVar
from weakref import WeakValueDictionary

from claimsched.errors import InvalidSchedule

_LONGEST_FIELD = 256  # characters: listing all 60 minutes takes 170
_QUOTED = 60  # characters of input an error message repeats
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_DAY_FIELDS = (2, 4)
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))  # day-of-week: 0 and 7 are Sunday
_OPEN_HIGH = (59, 23, 31, 12, 6)  # where '*' and 'a/n' end
_MONTHS = {name: n for n, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
_WEEKDAYS = {name: n for n, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_NAMES: tuple[dict[str, int], ...] = ({}, {}, {}, _MONTHS, _WEEKDAYS)
_NAME_HINTS = ("", "", "", " or month name (JAN-DEC)", " or day name (SUN-SAT)")
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
_ITEM = re.compile(
    r"(?P<start>[*?]|[0-9A-Za-z]+)(?:-(?P<end>[0-9A-Za-z]+))?(?:/(?P<step>[0-9]+))?")
_HASHED = re.compile(
    r"H(?:\((?P<start>[0-9A-Za-z]+)-(?P<end>[0-9A-Za-z]+)\))?(?:/(?P<step>[0-9]+))?",
    re.IGNORECASE)
_HASHED_HIGH = (59, 23, 28, 12, 6)  # where a bare 'H' ends: day 28 occurs in every month
_DURATION = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_DURATION_UNITS = (86_400, 3600, 60, 1)
_LONGEST_DURATION = timedelta.max // timedelta(seconds=1)
_TOO_MANY_DIGITS = 10**18  # stands for any longer number: beyond every limit here


@dataclass(frozen=True)
class Every:
    """``@every``: fires at the Unix epoch plus whole multiples of ``seconds``."""

    seconds: int


@dataclass(frozen=True)
class Cron:
    """The minutes, hours and days a cron expression names."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    either_day: bool  # both day fields restricted (see above): a day matches if either matches
    fixed_time: bool  # hour field neither '*' nor a step: once per local time on DST days

    def matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = day.isoweekday() % 7 in self.weekdays
        return in_month or in_week if self.either_day else in_month and in_week


def quoted(text: str) -> str:
    """``repr`` of input for an error message, cut after its first characters (so that the
    repr stays as short: an escape such as ``\\U00018cd6`` is ten characters for one)."""
    if len(shown := repr(text)) <= _QUOTED + 2:
        return shown
    cut = _QUOTED
    while len(shown := repr(text[:cut])) > _QUOTED + 2:
        cut -= 1
    return f"{shown}…"


def parse_duration(text: str) -> timedelta:
    """A duration such as ``10s``, ``1h30m`` or ``2d``: whole seconds, at least one."""
    if not isinstance(text, str):
        kind = type(text).__name__
        raise InvalidSchedule(f"invalid duration: expected a string, got {kind}", field="@every")
    try:
        return timedelta(seconds=_duration_seconds(text))
    except ValueError as error:
        raise InvalidSchedule(f"invalid duration {quoted(text)}: {error}", field="@every") from None


def parse_rule(expression: object) -> Cron | Every:
    """The rule of a cron expression, a descriptor or ``@every <duration>``."""
    if not isinstance(expression, str):
        kind = type(expression).__name__
        raise InvalidSchedule(f"invalid schedule: expected a string, got {kind}",
                              field="expression")
    key = " ".join(expression.split())  # one key, and one message, per rule
    rule = _LIVE_RULES.get(key)
    if rule is None:
        rule = _LIVE_RULES[key] = _parse_rule(key)
    return rule


_Values = TypeVar("_Values", tuple[int, ...], frozenset[int])

# Every schedule of one expression holds the same rule while any is alive, however many
# expressions are in use (the parse cache below holds the latest 1,024 only).
_LIVE_RULES: WeakValueDictionary[str, Cron | Every] = WeakValueDictionary()


@lru_cache(maxsize=4096)
def _interned(values: _Values) -> _Values:
    """The first of equal field value sets: rules share them (most name every day, month and
    weekday) instead of holding ~2 KiB of sets each."""
    return values


def resolve(expression: str, job_name: str | None) -> str:
    """The expression with its hashed fields (``H``, ``H(a-b)``, ``H/n``) written out for this
    job; any other expression unchanged but for its whitespace, normalised."""
    normal = " ".join(expression.split())
    if "H" not in normal.upper():
        return normal  # no hashed field: no need to remember it per job
    return _resolve(normal, job_name)


@lru_cache(maxsize=4096)
def _resolve(expression: str, job_name: str | None) -> str:
    words = expression.split()
    if any(len(word) > _LONGEST_FIELD for word in words):
        return expression  # parse_rule names the problem
    if not any(item.startswith(("H", "h")) for word in words for item in word.split(",")):
        return expression
    if words[0].startswith("@"):
        name = "@every" if words[0].lower() == "@every" else "descriptor"
        raise _invalid(expression, f"'H' (a hashed field) is for the 5 cron fields, not for "
                       f"{quoted(words[0])}", name)
    if len(words) != 5:
        return expression  # parse_rule names the problem
    if not job_name:
        hashed = next(index for index, word in enumerate(words)
                      if any(item.startswith(("H", "h")) for item in word.split(",")))
        raise _invalid(expression, f"{_FIELDS[hashed]} field {quoted(words[hashed])}: 'H' (a "
                       "hashed field) takes its value from the job name, and there is none here",
                       _FIELDS[hashed])
    return " ".join(
        ",".join(_hashed_item(expression, index, text, item, job_name)
                 for item in text.split(","))
        for index, text in enumerate(words))


def _hashed_item(expression: str, index: int, text: str, item: str, job_name: str) -> str:
    """One item of a field, written out if it is hashed: ``H`` -> a value,
    ``H(a-b)`` -> a value in a-b, ``H/n`` / ``H(a-b)/n`` -> ``first-last/n``."""
    if not item.startswith(("H", "h")):
        return item
    name, (low, high), names = _FIELDS[index], _BOUNDS[index], _NAMES[index]

    def bad(problem: str) -> InvalidSchedule:
        return _invalid(expression, f"{name} field {quoted(text)} {problem}", name)

    match = _HASHED.fullmatch(item)
    if match is None:
        raise bad(f"has {quoted(item)}: write a hashed field as H, H(a-b), H/n or H(a-b)/n")

    def value(token: str) -> int:
        number = _whole(token) if token.isdigit() else names.get(token.upper())
        if number is None:
            raise bad(f"has {quoted(token)} in {quoted(item)}, not a number{_NAME_HINTS[index]}")
        if not low <= number <= high:
            raise bad(f"has {quoted(item)}, out of range {low}-{high}")
        return number

    start, end, step_text = match.group("start", "end", "step")
    if start is None:
        first, last = low, (_HASHED_HIGH if step_text is None else _OPEN_HIGH)[index]
    else:
        first, last = value(start), value(end)
        if first > last:
            raise bad(f"has a range that runs backwards ({quoted(item)})")
    digest = hashlib.sha256(f"{job_name}\x00{index}".encode()).digest()
    hashed = int.from_bytes(digest[:8], "big")
    if step_text is None:
        return str(first + hashed % (last - first + 1))
    step = _whole(step_text)
    if step < 1:
        raise bad("has a step of 0; use 1 or more")
    offset = hashed % min(step, last - first + 1)
    return f"{first + offset}-{last}/{step}"


def _invalid(expression: str, detail: str, name: str) -> InvalidSchedule:
    return InvalidSchedule(f"invalid schedule {quoted(expression)}: {detail}", field=name)


def _whole(digits: str) -> int:
    """ASCII digits as a number; a very long one as `_TOO_MANY_DIGITS` (int() refuses 4300)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) < 18 else _TOO_MANY_DIGITS


def _duration_seconds(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise ValueError("use whole numbers with units d, h, m, s, e.g. 10s, 1h30m, 2d")
    seconds = sum(_whole(n) * unit for n, unit in zip(match.groups("0"), _DURATION_UNITS,
                                                       strict=True))
    if seconds < 1:
        raise ValueError("the duration must be at least 1s")
    if seconds > _LONGEST_DURATION:
        raise ValueError("the duration is too long")
    return seconds


@lru_cache(maxsize=1024)
def _parse_rule(expression: str) -> Cron | Every:
    """Cached: schedules with the same expression share one rule."""
    words = expression.split()
    if not words:
        raise _invalid(expression, "the expression is empty", "expression")
    head = words[0].lower()
    if head == "@every":
        if len(words) != 2:
            raise _invalid(expression, "@every takes one duration, e.g. '@every 10s'", "@every")
        if len(words[1]) > _LONGEST_FIELD:
            detail = f"@every duration {quoted(words[1])} is too long"
            raise _invalid(expression, detail, "@every")
        try:
            return Every(_duration_seconds(words[1]))
        except ValueError as error:
            detail = f"@every duration {quoted(words[1])} is not valid: {error}"
            raise _invalid(expression, detail, "@every") from None
    if head.startswith("@"):
        if head not in DESCRIPTORS:
            known = ", ".join([*DESCRIPTORS, "@every <duration>"])
            raise _invalid(expression, f"unknown descriptor {quoted(words[0])} (use {known})",
                           "descriptor")
        if len(words) != 1:
            raise _invalid(expression, f"descriptor {quoted(words[0])} takes no fields",
                           "descriptor")
        words = DESCRIPTORS[head].split()
    if len(words) != 5:
        detail = f"expected 5 fields ({' '.join(_FIELDS)}), got {len(words)}"
        raise _invalid(expression, detail, "expression")
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = (
        _parse_field(expression, index, text) for index, text in enumerate(words))
    if any_weekday and not any(day <= _LONGEST_MONTH[month - 1]
                               for month in months for day in days):
        detail = (f"never fires: day-of-month {quoted(words[2])} does not occur in month "
                  f"{quoted(words[3])}")
        raise _invalid(expression, detail, "day-of-month")
    return Cron(
        minutes=_interned(tuple(sorted(minutes))),
        hours=_interned(tuple(sorted(hours))),
        days=_interned(frozenset(days)),
        months=_interned(frozenset(months)),
        weekdays=_interned(frozenset(day % 7 for day in weekdays)),
        either_day=not (any_day or any_weekday),
        fixed_time=words[1] != "*" and "/" not in words[1],
    )


def _parse_field(expression: str, index: int, text: str) -> tuple[set[int], bool]:
    """The values of one field, and whether it is unrestricted: an item is ``*`` or ``?``
    alone or with a step of 1 (robfig/cron v3's star bit)."""
    name, (low, high), names = _FIELDS[index], _BOUNDS[index], _NAMES[index]
    open_high = _OPEN_HIGH[index]

    def bad(problem: str) -> InvalidSchedule:
        return _invalid(expression, f"{name} field {quoted(text)} {problem}", name)

    if len(text) > _LONGEST_FIELD:
        raise bad(f"is {len(text)} characters long, at most {_LONGEST_FIELD}")

    def value(token: str) -> int:
        if token.isdigit():  # ASCII: the pattern admits nothing else
            number = _whole(token)
        elif token.upper() in names:
            number = names[token.upper()]
        else:
            raise bad(f"has {quoted(token)}, not a number{_NAME_HINTS[index]}")
        if not low <= number <= high:
            raise bad(f"is out of range {low}-{high}")
        return number

    values: set[int] = set()
    unrestricted = False
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise bad("is not valid: use *, a number, a-b, */n, a-b/n, a/n or a list a,b,c")
        start, end, step_text = match.group("start", "end", "step")
        step = 1 if step_text is None else _whole(step_text)
        if start == "?" and index not in _DAY_FIELDS:
            raise bad("is not valid: '?' is only for day-of-month and day-of-week")
        wildcard = start in ("*", "?")
        if wildcard and end is not None:
            raise bad(f"is not valid: {start!r} cannot start a range")
        if step < 1:
            raise bad("has a step of 0; use 1 or more")
        first = low if wildcard else value(start)
        last = first if end is None else value(end)
        if end is None and (wildcard or step_text is not None):
            last = max(first, open_high)
        if first > last:
            raise bad(f"has a range that runs backwards ({quoted(item)})")
        values.update(range(first, last + 1, step))
        unrestricted = unrestricted or (wildcard and step == 1)
    return values, unrestricted
