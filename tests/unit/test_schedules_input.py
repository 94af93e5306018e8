"""Bad input of any kind: only `InvalidSchedule` (`UnknownTimeZone` for the zone), with a short
one-line message that names the field and never repeats a long input whole."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claimsched.errors import InvalidSchedule, UnknownTimeZone
from claimsched.schedule.schedules import parse_duration, parse_schedule

SHORT = 300  # characters: any message stays under this, whatever it was given
MEGABYTE = 1 << 20


def rejected(expression: object) -> InvalidSchedule:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression)  # type: ignore[arg-type]
    error = caught.value
    message = str(error)
    assert type(error) is InvalidSchedule
    assert len(message) < SHORT and "\n" not in message, message
    assert error.field is not None
    return error


@pytest.mark.parametrize(
    ("expression", "field"),
    [
        (None, "expression"),
        (5, "expression"),
        (b"* * * * *", "expression"),
        (["*", "*", "*", "*", "*"], "expression"),
        ("9" * 5000 + " * * * *", "minute"),
        ("1" * 200 + " * * * *", "minute"),
        ("*/" + "9" * 5000 + " * * * *", "minute"),
        ("*/" + "0" * 5000 + " * * * *", "minute"),
        ("* * * * " + "1" * 5000, "day-of-week"),
        ("0 0 1-" + "3" * 100 + " * *", "day-of-month"),
        ("@every " + "9" * 5000 + "s", "@every"),
        ("@every " + "9" * 100 + "s", "@every"),
        ("@every 99999999999999999d", "@every"),
        ("@every 1000000000d", "@every"),
        ("* * * * *\x00", "day-of-week"),
        ("\x00", "expression"),
        ("1," * (MEGABYTE // 2), "expression"),
        ("1 " * (MEGABYTE // 2), "expression"),
        ("* * * " + "JAN," * (MEGABYTE // 4) + " *", "month"),
        ("@" + "x" * MEGABYTE, "descriptor"),
    ],
)
def test_junk_raises_invalid_schedule_with_a_short_message_naming_the_field(
    expression: object, field: str
) -> None:
    assert rejected(expression).field == field


def test_a_long_expression_is_quoted_by_its_first_characters() -> None:
    message = str(rejected("* * " + "7" * MEGABYTE + " * *"))
    assert message.startswith("invalid schedule '* * 7777")
    assert "'… " in message or "'…:" in message
    assert "day-of-month field '7777" in message


@pytest.mark.parametrize("text", [None, 10, "9" * 5000 + "s", "1s" * MEGABYTE, "\x00"])
def test_junk_durations_raise_invalid_schedule(text: object) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_duration(text)  # type: ignore[arg-type]
    assert len(str(caught.value)) < SHORT
    assert caught.value.field == "@every"


@pytest.mark.parametrize("zone", [None, 3, "x" * MEGABYTE, "Europe/" + "B" * MEGABYTE, "\x00"])
def test_junk_time_zones_raise_unknown_time_zone_with_a_short_message(zone: object) -> None:
    with pytest.raises(UnknownTimeZone) as caught:
        parse_schedule("* * * * *", zone)  # type: ignore[arg-type]
    assert len(str(caught.value)) < SHORT


FIELD_CHARACTERS = "0123456789*?/-,"
fields = st.one_of(
    st.text(FIELD_CHARACTERS, min_size=1, max_size=8),
    st.text(FIELD_CHARACTERS + "JANFEBMONSUNjanmon\x00é\u2003", min_size=1, max_size=12),
    st.integers(0, 10**40).map(str),
    st.tuples(st.sampled_from(["*/", "1-", "0/", ""]), st.integers(0, 10**30)).map(
        lambda pair: f"{pair[0]}{pair[1]}"),
)
junk = st.one_of(
    st.text(max_size=40),
    st.lists(fields, min_size=1, max_size=6).map(" ".join),
    st.tuples(st.sampled_from(["@every ", "@", "@daily ", "@every  1"]), st.text(max_size=20)).map(
        "".join),
    st.binary(max_size=20),
    st.none(),
    st.integers(),
)


@settings(max_examples=400, deadline=None, database=None)
@given(junk)
def test_any_input_parses_or_raises_invalid_schedule_with_a_short_message(
    expression: object,
) -> None:
    try:
        schedule = parse_schedule(expression)  # type: ignore[arg-type]
    except InvalidSchedule as error:
        assert type(error) is InvalidSchedule
        assert len(str(error)) < SHORT and "\n" not in str(error)
        assert error.field is not None
        return
    start = datetime(2024, 1, 1, tzinfo=UTC)
    following = schedule.next_after(start)
    assert following is None or following > start  # None: @every beyond year 9999


def test_input_quoted_twice_with_wide_escapes_still_gives_a_short_message() -> None:
    """Found by the property above: each of these characters is ten in its repr, and the
    duration is quoted again inside the expression's message (it came to 301 characters)."""
    wide = "\U00018cd6\U00018cd6\U00018d09\U00018d09\U00018d09\U00018d09\U0001fbcb\U0002ebe1"
    assert "…" in str(rejected(f"@EVERY 000000\x08{wide}"))
