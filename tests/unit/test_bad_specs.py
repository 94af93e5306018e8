"""Bad schedules, time zones and settings: refused with an error naming what is wrong, by
`job_spec` and by `Agent.job`, before anything reaches a database (the same values through
`claimsched apply`, against a real one: tests/integration/test_bad_input.py)."""

from __future__ import annotations

from typing import Any

import pytest

from claimsched import Agent, InvalidSchedule, InvalidSpec, UnknownTimeZone
from claimsched.schedule.specs import job_spec

# -- schedules: cron fields, descriptors, @every -----------------------------------------------

BAD_CRON = [
    ("* * * *", "expected 5 fields"),
    ("* * * * * *", "expected 5 fields"),
    ("*/0 * * * *", "step of 0"),
    ("5-1 * * * *", "runs backwards"),
    ("* 24 * * *", "hour field '24'"),
    ("* * 0 * *", "day-of-month field '0'"),
    ("* * 32 * *", "day-of-month field '32'"),
    ("* * * 13 *", "month field '13'"),
    ("* * * * 8", "day-of-week field '8'"),
    ("* * * JAN-FOO *", "month field 'JAN-FOO'"),
    ("1,,2 * * * *", "minute field '1,,2'"),
    ("-1 * * * *", "minute field '-1'"),
    ("*/5/2 * * * *", "minute field '*/5/2'"),
    ("0 0 31 2 *", "never fires"),
    ("a b c d e", "minute field 'a'"),
    ("", "empty"),
    ("@fortnightly", "unknown descriptor '@fortnightly'"),
    ("@daily extra", "takes no fields"),
]
BAD_EVERY = [
    ("@every", "takes one duration"),
    ("@every -5s", "'-5s' is not valid"),
    ("@every 5x", "'5x' is not valid"),
    ("@every 1.5s", "'1.5s' is not valid"),
    ("@every 10", "'10' is not valid"),
    ("@every 1s 2s", "takes one duration"),
    ("@every 999999999999h", "too long"),
]


@pytest.mark.parametrize(("schedule", "message"), BAD_CRON + BAD_EVERY)
def test_a_malformed_schedule_is_refused_naming_the_bad_part(schedule: str, message: str) -> None:
    with pytest.raises(InvalidSchedule, match="invalid schedule") as caught:
        job_spec(job_name="j", schedule=schedule)
    assert message in str(caught.value)
    with pytest.raises(InvalidSchedule):
        Agent("postgresql://nowhere.invalid/x").job("j", schedule=schedule)


@pytest.mark.parametrize(
    "zone",
    [
        "Mars/Base",
        "",
        "../../etc/passwd",
        "UTC; DROP TABLE job_runs",
        "Europe/Berlin\x00",
        "utc",
        "Etc/GMT+14",
        "America/New_York ",
    ],
)
def test_an_unknown_time_zone_is_refused_by_name(zone: str) -> None:
    with pytest.raises(UnknownTimeZone, match="unknown time zone"):
        job_spec(job_name="j", schedule="@daily", time_zone=zone)


# -- numeric bounds: lease, heartbeat, attempts, windows -------------------------------------------

OUT_OF_RANGE = [
    ({"lease_seconds": 0}, "lease_seconds"),
    ({"lease_seconds": -1}, "lease_seconds"),
    ({"lease_seconds": 86401}, "lease_seconds"),
    ({"lease_seconds": 2**63}, "lease_seconds"),
    ({"lease_seconds": 1.5}, "lease_seconds"),
    ({"lease_seconds": "abc"}, "lease_seconds"),
    ({"heartbeat_seconds": 0}, "heartbeat_seconds"),
    ({"heartbeat_seconds": 41, "lease_seconds": 120}, "at most a third of lease_seconds"),
    ({"heartbeat_seconds": 10**9}, "heartbeat_seconds"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": -3}, "max_attempts"),
    ({"max_attempts": 101}, "max_attempts"),
    ({"max_attempts": None}, "max_attempts"),
    ({"catch_up_window_seconds": -1}, "catch_up_window_seconds"),
    ({"catch_up_window_seconds": 2678401}, "catch_up_window_seconds"),
    ({"max_runtime_seconds": 0}, "max_runtime_seconds"),
    ({"concurrency_policy": "forbid"}, "concurrency_policy"),
    ({"catch_up_policy": "Some"}, "catch_up_policy"),
    ({"retry_on_failure": "maybe"}, "retry_on_failure"),
]


@pytest.mark.parametrize(("fields", "message"), OUT_OF_RANGE)
def test_an_out_of_range_setting_is_refused_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSpec) as caught:
        job_spec(job_name="j", schedule="@daily", **fields)
    assert message in str(caught.value)
    with pytest.raises(InvalidSpec, match=message.split()[0]):
        Agent("postgresql://nowhere.invalid/x").job("j", schedule="@daily", **fields)
