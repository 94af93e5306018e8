"""Hashed fields (``H``): one value per job name, stable everywhere, spread over many jobs."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from claimsched.errors import InvalidSchedule
from claimsched.schedule.schedules import parse_schedule
from claimsched.schedule.specs import job_spec


@pytest.mark.parametrize(
    ("expression", "job", "resolved"),
    [
        # Fixed values: a change of the hash moves every hashed job in every deployment, so it
        # must fail here first.
        ("H 2 * * *", "daily_report", "44 2 * * *"),
        ("H/15 H(9-17) H * H", "daily_report", "14-59/15 16 5 * 4"),
        ("0 0 * * H(MON-FRI)", "daily_report", "0 0 * * 2"),
        ("0 0 H(1-15)/7 H/3 *", "invoice-run", "0 0 7-15/7 1-12/3 *"),
        ("H(0-29) H * * *", "invoice-run", "8 17 * * *"),
        ("H,30 * * * *", "invoice-run", "38,30 * * * *"),
        ("h  2 * * *", "daily_report", "44 2 * * *"),
        ("*/5 * * * *", "daily_report", "*/5 * * * *"),
        ("@every 10s", None, "@every 10s"),
        ("0 0 * * THU", None, "0 0 * * THU"),
    ],
)
def test_hashed_fields_resolve_to_fixed_values_for_a_job_name(
    expression: str, job: str | None, resolved: str
) -> None:
    assert parse_schedule(expression, job_name=job).resolved == resolved


def test_hashed_schedule_fires_at_its_resolved_instants() -> None:
    hashed = parse_schedule("H 2 * * *", "Europe/Berlin", "daily_report")
    plain = parse_schedule("44 2 * * *", "Europe/Berlin")
    start = datetime(2026, 3, 1, tzinfo=UTC)
    assert hashed.upcoming(start, 40) == plain.upcoming(start, 40)


def test_the_same_hashed_expression_differs_between_job_names() -> None:
    first = parse_schedule("H H * * *", job_name="a")
    second = parse_schedule("H H * * *", job_name="b")
    assert first.resolved != second.resolved
    assert first != second


def test_the_job_spec_resolves_with_its_own_name() -> None:
    spec = job_spec(job_name="daily_report", schedule="H 2 * * *")
    assert spec.parsed.resolved == "44 2 * * *"


def test_five_hundred_jobs_spread_over_the_hour() -> None:
    minutes = Counter(
        int(parse_schedule("H 2 * * *", job_name=f"job-{n}").resolved.split()[0])
        for n in range(500)
    )
    assert set(minutes) == set(range(60))  # every minute of the hour is used
    assert max(minutes.values()) <= 20  # about 8 each: no minute takes a crowd


@pytest.mark.parametrize(
    ("expression", "low", "high"),
    [("H(0-29) * * * *", 0, 29), ("0 H(9-17) * * *", 9, 17), ("0 0 H * *", 1, 28),
     ("0 0 * * H", 0, 6), ("0 0 1 H(6-8) *", 6, 8)],
)
def test_hashed_values_stay_within_their_range(expression: str, low: int, high: int) -> None:
    index = next(i for i, word in enumerate(expression.split()) if "H" in word)
    values = {int(parse_schedule(expression, job_name=f"job-{n}").resolved.split()[index])
              for n in range(300)}
    assert values == set(range(low, high + 1))


@pytest.mark.parametrize(("step", "low", "high"), [(15, 0, 59), (7, 0, 59), (90, 0, 59)])
def test_hashed_steps_start_at_an_offset_below_the_step(step: int, low: int, high: int) -> None:
    offsets = set()
    for n in range(300):
        minute = parse_schedule(f"H/{step} * * * *", job_name=f"job-{n}").resolved.split()[0]
        first, _, rest = minute.partition("-")
        assert rest == f"{high}/{step}"
        offsets.add(int(first) - low)
    assert offsets == set(range(min(step, high - low + 1)))


@pytest.mark.parametrize(
    ("expression", "field", "words"),
    [
        ("@every H", "@every", "5 cron fields"),
        ("@daily H", "descriptor", "5 cron fields"),
        ("H(30-10) * * * *", "minute", "backwards"),
        ("H(0-70) * * * *", "minute", "out of range 0-59"),
        ("0 H(0-24) * * *", "hour", "out of range 0-23"),
        ("0 0 H(0-5) * *", "day-of-month", "out of range 1-31"),
        ("0 0 * * H(MON-XYZ)", "day-of-week", "not a number or day name"),
        ("H-5 * * * *", "minute", "H, H(a-b), H/n or H(a-b)/n"),
        ("0 H(1-5 * * *", "hour", "H, H(a-b), H/n or H(a-b)/n"),
        ("H/0 * * * *", "minute", "step of 0"),
    ],
)
def test_bad_hashed_fields_name_the_field(expression: str, field: str, words: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression, job_name="daily_report")
    assert caught.value.field == field
    assert words in str(caught.value)


def test_a_hashed_field_without_a_job_name_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSchedule, match="job name") as caught:
        parse_schedule("0 H * * *")
    assert caught.value.field == "hour"
