"""Pieces of the pages that need no database: times in the schedule's zone, the timeline of a
frequent schedule, the JSON link of each page, a square's tooltip and mark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast
from zoneinfo import ZoneInfo

from claimsched.web import model, pages
from claimsched.web.occurrences import Fire, Occurrence, Run

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
    long_ago = NOW - timedelta(days=30)
    start = pages._timeline_start(every_second, since, NOW, long_ago)
    assert start == NOW - timedelta(seconds=model.TIMELINE_LIMIT - 1)
    assert pages._timeline_title(every_second, start, since, NOW, long_ago).startswith(
        f"The last {model.TIMELINE_LIMIT} occurrences")
    ticks = pages._ticks(start, NOW, ZoneInfo("UTC"))
    assert 1 < len(ticks) <= 12 and all(start <= t <= NOW for t, _ in ticks)
    hourly = [Occurrence(NOW - timedelta(hours=i), "done") for i in range(48)]
    assert pages._timeline_start(hourly, since, NOW, long_ago) == since
    assert pages._timeline_title(hourly, since, since, NOW, long_ago) == "The last 7 days"
    assert [text for _, text in pages._ticks(since, NOW, ZoneInfo("UTC"))][-1] == "Fri 04 Dec"


def test_each_pages_json_link_opens_that_pages_data() -> None:
    page = pages._page("run 5", "", NOW, "/api/runs/5")
    assert 'href="/api/runs/5" data-field="json"' in page


def test_a_square_names_who_ran_each_attempt_and_carries_a_mark_when_it_took_more() -> None:
    three = Run(7, NOW, "done", 3, 2, claimed_by="r3", earlier_owners=("r1", "r2"))
    once = Run(8, NOW + timedelta(minutes=1), "done", claimed_by="r2")
    strip = pages._strip([Occurrence(three.fire_time, "done", three),
                          Occurrence(once.fire_time, "done", once)])
    assert ("<title>2026-12-04 12:00:00 UTC: done; ran by r1 → r2 → r3 (3 attempts, orphaned 2 "
            "times); run 7, scheduled</title>") in strip
    assert "<title>2026-12-04 12:01:00 UTC: done; ran by r2; run 8, scheduled</title>" in strip
    assert strip.count('class="mark"') == 1 and strip.count('class="sq done"') == 2


def test_an_owner_nobody_recorded_is_a_question_mark_and_every_owner_is_escaped() -> None:
    run = Run(9, NOW, "failed", 2, 1, claimed_by="<b>r1</b>")
    label = pages._label(Occurrence(NOW, "failed", run))
    assert "ran by ? → <b>r1</b> (2 attempts, orphaned 1 time)" in label
    strip = pages._strip([Occurrence(NOW, "failed", run)])
    assert "<b>" not in strip and "? → &lt;b&gt;r1&lt;/b&gt;" in strip


def test_a_request_not_taken_yet_names_nobody() -> None:
    pending = Run(10, NOW, "pending", 0, kind="manual")
    assert pages._label(Occurrence(NOW, "waiting", pending)) == (
        "2026-12-04 12:00:00 UTC: waiting for an owner (requested or orphaned); run 10, manual")


def test_a_schedule_active_for_minutes_has_a_timeline_of_those_minutes_not_of_the_week() -> None:
    since, active = NOW - timedelta(days=7), NOW - timedelta(minutes=10)
    every_2s = [Occurrence(active + timedelta(seconds=2 * i), "done") for i in range(1, 300)]
    start = pages._timeline_start(every_2s, since, NOW, active)
    assert start == active
    assert pages._timeline_title(every_2s, start, since, NOW, active) == (
        "The last 10 min, since it became active")
    assert pages._ticks(start, NOW, ZoneInfo("UTC"))[0][1] == "11:50"
    older_run = [Occurrence(NOW - timedelta(hours=2), "done"), *every_2s]
    assert pages._timeline_start(older_run, since, NOW, active) == NOW - timedelta(hours=2)
    resumes_later = NOW + timedelta(hours=1)  # suspended until then, nothing ran since
    assert pages._timeline_start([], since, NOW, resumes_later) == since


def test_the_next_fires_of_a_schedule_in_utc_are_one_column() -> None:
    fire = Fire(NOW, NOW, None)
    summary = cast(model.Summary, SimpleNamespace(problem=None))
    data = cast(model.Detail, SimpleNamespace(next_fires=[fire], summary=summary))
    utc = pages._next_fires(data, ZoneInfo("UTC"))
    assert utc.count("2026-12-04 12:00:00") == 1 and "local time" not in utc
    paris = pages._next_fires(data, ZoneInfo("Europe/Paris"))
    assert "local time" in paris and "clock change that day" in paris
