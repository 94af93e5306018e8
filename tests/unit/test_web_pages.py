"""Pieces of the pages that need no database: times in the schedule's zone, the timeline of a
frequent schedule, the JSON link of each page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from claimsched.web import model, pages
from claimsched.web.occurrences import Occurrence

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def test_a_time_is_shown_once_in_utc_and_twice_elsewhere() -> None:
    utc = pages._both(NOW, ZoneInfo("UTC"))
    assert utc.count("2026-12-04") == 1 and "UTC" in utc
    paris = pages._both(NOW, ZoneInfo("Europe/Paris"))
    assert "13:00:00 CET" in paris and "12:00:00 UTC" in paris


def test_a_frequent_schedules_timeline_spans_its_occurrences_not_the_week() -> None:
    since = NOW - timedelta(days=7)
    every_second = [Occurrence(NOW - timedelta(seconds=i), "done")
                    for i in range(model.TIMELINE_LIMIT)]
    start = pages._timeline_start(every_second, since)
    assert start == NOW - timedelta(seconds=model.TIMELINE_LIMIT - 1)
    assert pages._timeline_title(every_second, since, NOW).startswith(
        f"The last {model.TIMELINE_LIMIT} occurrences")
    ticks = pages._ticks(start, NOW, ZoneInfo("UTC"))
    assert 1 < len(ticks) <= 12 and all(start <= t <= NOW for t, _ in ticks)
    hourly = [Occurrence(NOW - timedelta(hours=i), "done") for i in range(48)]
    assert pages._timeline_start(hourly, since) == since
    assert pages._timeline_title(hourly, since, NOW) == "The last 7 days"
    assert [text for _, text in pages._ticks(since, NOW, ZoneInfo("UTC"))][-1] == "Fri 04 Dec"


def test_each_pages_json_link_opens_that_pages_data() -> None:
    page = pages._page("run 5", "", NOW, "/api/runs/5")
    assert 'href="/api/runs/5" data-field="json"' in page
