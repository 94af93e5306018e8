"""Schedules in words: "At 06:00, Monday through Friday", "Every 5 minutes", "Every 10 seconds".

Common cron shapes only; anything else is shown as the expression itself (which the pages
always show beside the words), and so is an expression that does not parse.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InvalidSchedule
from ..schedule.cron import DESCRIPTORS, Every, parse_rule

_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_WEEKDAY_NAMES = {name[:3].upper(): n for n, name in enumerate(_WEEKDAYS)}
_MONTH_NAMES = {name[:3].upper(): n for n, name in enumerate(_MONTHS, 1)}
_UNITS = ((86_400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
_MOST_TIMES = 6  # "At 06:00, 12:00 and 18:00"; more than this reads better as the expression


def describe(expression: str) -> str:
    """The schedule in words, or the expression when its shape is not a common one."""
    try:
        rule = parse_rule(expression)
    except InvalidSchedule:
        return expression
    if isinstance(rule, Every):
        return f"Every {_duration(rule.seconds)}"
    words = expression.split()
    if words[0].lower() in DESCRIPTORS:
        words = DESCRIPTORS[words[0].lower()].split()
    minute, hour, day, month, weekday = (w.replace("?", "*") for w in words)
    when, daily = _time_of_day(minute, hour), _days(day, month, weekday)
    if when is None or daily is None:
        return expression
    if not daily:
        return when + (", every day" if when.startswith("At ") else "")
    return f"{when}, {daily}"


def _duration(seconds: int) -> str:
    parts = []
    for size, unit in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}s" if count > 1 else f"1 {unit}")
    return parts[0].removeprefix("1 ") if len(parts) == 1 else " ".join(parts)


def _time_of_day(minute: str, hour: str) -> str | None:
    minutes, hours = _numbers(minute), _numbers(hour)
    if minute == "*" and hour == "*":
        return "Every minute"
    step = _step(minute)
    if step is not None and hour == "*":
        return "Every minute" if step == 1 else f"Every {step} minutes"
    if minutes is not None and len(minutes) == 1:
        at = minutes[0]
        if hour == "*":
            return "Every hour" + (f", at minute {at}" if at else "")
        every = _step(hour)
        if every is not None:
            return (f"Every {every} hours" if every > 1 else "Every hour") + (
                f", at minute {at}" if at else "")
        span = _range(hour)
        if span is not None:
            return f"Every hour from {span[0]:02}:{at:02} to {span[1]:02}:{at:02}"
    if minutes is not None and hours is not None and len(minutes) * len(hours) <= _MOST_TIMES:
        times = sorted(f"{h:02}:{m:02}" for h in hours for m in minutes)
        return f"At {_listed(times)}"
    return None


def _days(day: str, month: str, weekday: str) -> str | None:
    """The day phrase ("" for every day), or None for a shape this does not put in words."""
    if day == "*" and month == "*" and weekday == "*":
        return ""
    if day == "*" and month == "*":
        return _weekdays(weekday)
    days, months = _numbers(day), _numbers(month, _MONTH_NAMES)
    if weekday != "*" or days is None:
        if day != "*" or months is None:
            return None
        in_months = _listed([_MONTHS[m - 1] for m in months])
        if weekday == "*":
            return f"every day in {in_months}"
        weekdays = _weekdays(weekday)
        return None if weekdays is None else f"{weekdays or 'every day'} in {in_months}"
    if month == "*":
        return f"on day{'s' if len(days) > 1 else ''} {_listed(map(str, days))} of the month"
    if months is not None and len(months) == 1:
        return f"on {_listed(map(str, days))} {_MONTHS[months[0] - 1]}"
    return None


def _weekdays(text: str) -> str | None:
    span = _range(text, _WEEKDAY_NAMES)
    if span is not None:
        first, last = span
        if len({day % 7 for day in range(first, last + 1)}) == len(_WEEKDAYS):
            return ""
        return f"{_WEEKDAYS[first % 7]} through {_WEEKDAYS[last % 7]}"
    days = _numbers(text, _WEEKDAY_NAMES)
    if days is None:
        return None
    return "on " + _listed([_WEEKDAYS[d % 7] for d in days])


def _numbers(text: str, names: dict[str, int] | None = None) -> list[int] | None:
    """The values of a list of plain numbers (or names), or None for any other shape."""
    values = []
    for item in text.split(","):
        value = _value(item, names)
        if value is None:
            return None
        values.append(value)
    return sorted(set(values))


def _value(item: str, names: dict[str, int] | None) -> int | None:
    if item.isdigit():
        return int(item)
    if names is not None:
        return names.get(item.upper())
    return None


def _step(text: str) -> int | None:
    """n of `*/n` (or `0/n`)."""
    start, slash, step = text.partition("/")
    return int(step) if slash and start in ("*", "0") and step.isdigit() else None


def _range(text: str, names: dict[str, int] | None = None) -> tuple[int, int] | None:
    first, dash, last = text.partition("-")
    low, high = _value(first, names), _value(last, names)
    return (low, high) if dash and low is not None and high is not None else None


def _listed(items: Iterable[str]) -> str:
    words = list(items)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
