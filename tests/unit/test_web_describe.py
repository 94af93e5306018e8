"""The web view's schedules in words: common cron shapes, @every, descriptors; anything else
(and anything that does not parse) is shown as the expression itself."""

from __future__ import annotations

import pytest

from claimsched.web.describe import describe


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("0 6 * * 1-5", "At 06:00, Monday through Friday"),
        ("30 9 * * MON-FRI", "At 09:30, Monday through Friday"),
        ("*/5 * * * *", "Every 5 minutes"),
        ("* * * * *", "Every minute"),
        ("*/1 * * * *", "Every minute"),
        ("@every 10s", "Every 10 seconds"),
        ("@every 1m", "Every minute"),
        ("@every 90s", "Every 1 minute 30 seconds"),
        ("@every 1h30m", "Every 1 hour 30 minutes"),
        ("@every 2d", "Every 2 days"),
        ("@hourly", "Every hour"),
        ("15 * * * *", "Every hour, at minute 15"),
        ("0 */2 * * *", "Every 2 hours"),
        ("5 */6 * * *", "Every 6 hours, at minute 5"),
        ("0 9-17 * * *", "Every hour from 09:00 to 17:00"),
        ("@daily", "At 00:00, every day"),
        ("15 3 * * *", "At 03:15, every day"),
        ("0 6,18 * * *", "At 06:00 and 18:00, every day"),
        ("0 6,12,18 * * ?", "At 06:00, 12:00 and 18:00, every day"),
        ("@weekly", "At 00:00, on Sunday"),
        ("0 0 * * 7", "At 00:00, on Sunday"),
        ("5 4 * * sun", "At 04:05, on Sunday"),
        ("0 0 * * 1,3,5", "At 00:00, on Monday, Wednesday and Friday"),
        ("0 12 * * 0-6", "At 12:00, every day"),
        ("@monthly", "At 00:00, on day 1 of the month"),
        ("0 0 1,15 * *", "At 00:00, on days 1 and 15 of the month"),
        ("@yearly", "At 00:00, on 1 January"),
        ("0 0 25 12 *", "At 00:00, on 25 December"),
        ("0 0 * 1 *", "At 00:00, every day in January"),
        ("30 2 * 3 0", "At 02:30, on Sunday in March"),
        ("0 8 * 6,7 1-5", "At 08:00, Monday through Friday in June and July"),
    ],
)
def test_common_shapes_read_as_words(expression: str, words: str) -> None:
    assert describe(expression) == words


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 */2 * 1",  # both day fields restricted: either may match
        "*/5 9-17 * * 1-5",
        "0,20,40 1,2,3 * * *",  # nine times a day: the expression says it better
        "5/15 * * * *",
        "0 0 1-7 * *",
    ],
)
def test_other_shapes_are_shown_as_the_expression(expression: str) -> None:
    assert describe(expression) == expression


@pytest.mark.parametrize("expression", ["", "not a schedule", "61 * * * *", "@every 0s",
                                        "<script>alert(1)</script>"])
def test_an_expression_that_does_not_parse_is_shown_as_it_is(expression: str) -> None:
    assert describe(expression) == expression
