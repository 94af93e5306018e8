"""The pages of a real `claimsched web` process in Debian's headless Chromium: they load with
no console error, no page error and no dialog; what they count is what the database holds; who
ran each attempt shows without a click; hostile text is text; POST is refused; each page fits a
phone's width (wide tables scroll in their own box); screenshots of the overview, a schedule, a
run with three attempts and a dead fleet, at 1400 px and at a phone's 390 px."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from claimsched.schedule.schedules import parse_schedule
from claimsched.tools.postgres import free_port
from tests.helpers.web_seed import (
    HOSTILE_ERROR,
    HOSTILE_JOB,
    PASSWORD,
    THREE_OWNERS,
    seed,
    seed_dead_fleet,
)
from tests.integration.support import sql

from .conftest import PHONE, Server, Watched


def _fire_time(title: str) -> datetime:
    """The fire time a square's tooltip starts with: '2026-06-01 02:00:00 UTC: ...'."""
    return datetime.strptime(title[:23], "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)


def test_the_overview_squares_are_the_database_runs_and_the_page_is_clean(
    dsn: str, web_server: Callable[[str], Server], watched: Watched, tmp_path: Path
) -> None:
    seeded = seed(dsn)
    server = web_server(dsn)
    watched.goto(server.url + "/")
    page = watched.page
    schedules = sql(dsn, "SELECT count(*) FROM job_schedule")[0][0]
    assert page.locator("[data-count=schedules]").inner_text() == f"{schedules} schedules"
    for job in ("fast", "nightly"):
        row = page.locator(f'tr[data-job="{job}"]')
        oldest = _fire_time(row.locator("svg.strip title").first.text_content())
        done, failed, retried, runs = sql(
            dsn, "SELECT count(*) FILTER (WHERE status = 'done'), "
                 "count(*) FILTER (WHERE status = 'failed'), "
                 "count(*) FILTER (WHERE attempt > 1 OR orphan_count > 0), count(*) "
                 "FROM job_runs WHERE job_name = %s AND fire_time >= %s", [job, oldest])[0]
        assert row.locator("rect.done").count() == done, job
        assert row.locator("rect.failed").count() == failed, job
        assert row.locator("svg.strip .retried .mark").count() == retried > 0, job
        assert row.locator("svg.strip a").count() == runs, job  # each run links to its page
    nightly = page.locator('tr[data-job="nightly"]')
    since, = sql(dsn, "SELECT active_since FROM job_schedule WHERE job_name = 'nightly'")[0]
    expected = parse_schedule("0 2 * * *", "Europe/Berlin").between(since, seeded.now)
    runs = sql(dsn, "SELECT count(*) FROM job_runs WHERE job_name = 'nightly'")[0][0]
    assert nightly.locator("rect.missed").count() == len(expected) - runs > 0
    assert "At 02:00, every day" in nightly.inner_text()
    assert page.locator('tr[data-job="paused"] [data-field=state]').inner_text() == "suspended"
    # a next fire in UTC is one time; in Berlin, the local time and the UTC one
    for job, times in (("fast", 1), ("nightly", 2)):
        nxt = page.locator(f'tr[data-job="{job}"] td[data-label="next fire"]').inner_text()
        assert len(re.findall(r"\d\d:\d\d:\d\d", nxt)) == times, (job, nxt)
    watched.screenshot(tmp_path / "web-overview.png")
    watched.assert_clean()


def test_a_job_whose_fleet_is_gone_is_marked_late_and_unhealthy_on_both_pages(
    dsn: str, web_server: Callable[[str], Server], watched: Watched, tmp_path: Path
) -> None:
    seed(dsn)
    seed_dead_fleet(dsn)
    server = web_server(dsn)
    page = watched.page
    watched.goto(server.url + "/")
    health = page.locator('tr[data-job="tick"] [data-field=health]')
    assert "unhealthy" in (health.get_attribute("class") or "")
    assert health.inner_text().startswith("late ") and "no live agent" in health.inner_text()
    assert page.locator('tr[data-job="tick"] rect.late').count() > 0
    assert page.locator('tr[data-job="fast"] [data-field=health]').inner_text() == "healthy"
    unhealthy = page.locator("[data-count=unhealthy]").inner_text()
    assert unhealthy.endswith(" unhealthy") and int(unhealthy.split()[0]) >= 1
    watched.screenshot(tmp_path / "web-overview-dead-fleet.png")
    page.get_by_role("link", name="tick", exact=True).click()
    page.wait_for_url(server.url + "/schedules/tick")
    health = page.locator("[data-field=health]")
    assert "unhealthy" in (health.get_attribute("class") or "")
    assert health.inner_text().startswith("late ") and "no live agent" in health.inner_text()
    assert page.locator("svg.timeline rect.late").count() > 0
    # Active for 10 minutes: its timeline spans them, not the last pixels of a week.
    assert page.get_by_role("heading", name="since it became active").count() == 1
    bars = page.locator("svg.timeline rect.sq")
    first, last = bars.first.bounding_box(), bars.last.bounding_box()
    assert first is not None and last is not None and last["x"] - first["x"] > 800
    assert page.locator("table.next th").all_inner_texts() == ["UTC"]  # a UTC schedule
    watched.screenshot(tmp_path / "web-schedule-dead-fleet.png")
    watched.assert_clean()


def test_a_hostile_job_name_and_error_render_as_text_and_nothing_runs(
    dsn: str, web_server: Callable[[str], Server], watched: Watched
) -> None:
    seed(dsn)
    server = web_server(dsn)
    page = watched.page
    watched.goto(server.url + "/")
    link = page.get_by_role("link", name=HOSTILE_JOB)
    assert link.inner_text() == HOSTILE_JOB
    link.click()
    page.wait_for_url(server.url + "/schedules/" + quote(HOSTILE_JOB, safe=""))
    assert page.locator("h1").inner_text().startswith(HOSTILE_JOB)
    page.locator("tr:has(rect.failed) a").first.click()  # the occurrence table's run link
    page.wait_for_url(f"{server.url}/runs/*")
    error = page.locator("[data-field=error]").inner_text()
    assert error.startswith("<img src=x onerror=alert(2)>") and PASSWORD not in error
    assert "postgresql://app:***@db:5432/app" in error and error != HOSTILE_ERROR
    assert page.locator("img").count() == 0
    assert page.evaluate("document.scripts.length") == 0
    assert PASSWORD not in page.content()
    watched.assert_clean()


def test_a_schedule_page_shows_its_timeline_and_next_fires_with_clock_changes(
    dsn: str, web_server: Callable[[str], Server], watched: Watched, tmp_path: Path
) -> None:
    seed(dsn)
    server = web_server(dsn)
    page = watched.page
    watched.goto(server.url + "/schedules/nightly")
    since = datetime.fromisoformat(
        sql(dsn, "SELECT (now() - interval '7 days')::text")[0][0])
    done = sql(dsn, "SELECT count(*) FROM job_runs WHERE job_name = 'nightly' "
                    "AND status = 'done' AND fire_time > %s", [since])[0][0]
    assert page.locator("svg.timeline rect.done").count() == done
    assert page.locator("svg.timeline rect.missed").count() > 0
    assert page.locator("table.next tbody tr").count() == 10
    watched.screenshot(tmp_path / "web-schedule.png")
    watched.goto(server.url + "/schedules/spring")
    changes = page.locator("[data-field=clock-change]")
    assert changes.count() == 2  # the last Sunday of March, two years running
    assert changes.first.inner_text() == "clocks go forward 1 h"
    watched.assert_clean()


def test_the_agents_page_and_a_run_page_show_the_database(
    dsn: str, web_server: Callable[[str], Server], watched: Watched
) -> None:
    seeded = seed(dsn)
    server = web_server(dsn)
    page = watched.page
    watched.goto(server.url + "/agents")
    assert page.locator("[data-count=live]").inner_text() == "1 live"
    assert "nightly, fast" in page.locator('tr[data-agent="agent-live"]').inner_text()
    run_id = seeded.run_ids["nightly"][0]
    watched.goto(f"{server.url}/runs/{run_id}")
    assert page.locator("[data-field=owners]").inner_text() == "agent-live"
    assert page.locator("[data-field=attempt]").inner_text() == "1 of 3"
    assert page.locator("[data-field=duration]").inner_text() == "2.000 s"
    assert "Effect receipts (3)" in page.content()
    watched.assert_clean()


def test_who_ran_each_attempt_of_a_run_shows_on_its_square_its_row_and_its_page(
    dsn: str, web_server: Callable[[str], Server], watched: Watched
) -> None:
    seeded = seed(dsn)
    server = web_server(dsn)
    page = watched.page
    run = seeded.three_attempts
    chain = " → ".join(THREE_OWNERS)
    watched.goto(server.url + "/")
    square = page.locator(f'tr[data-job="nightly"] svg.strip a[href="/runs/{run}"]')
    assert square.locator("rect.sq").get_attribute("class") == "sq done"  # its final outcome
    assert square.locator(".mark").count() == 1
    tooltip = square.locator("title").text_content() or ""
    assert f": done; ran by {chain} (3 attempts, orphaned 2 times); run {run}" in tooltip
    legend = page.locator(".legend").inner_text()
    assert "orphaned or retried" not in legend and "needed more than one attempt" in legend
    watched.goto(server.url + "/schedules/nightly")
    bar = page.locator(f'svg.timeline a[href="/runs/{run}"]')
    assert f"ran by {chain}" in (bar.locator("title").text_content() or "")
    assert bar.locator(".mark").count() == 1
    assert page.locator("[data-count=retried]").inner_text() == "1 needed more than one attempt"
    row = page.locator(f'tr[data-run="{run}"]')
    assert row.locator("[data-field=ran-by]").inner_text().splitlines() == [
        chain, "3 attempts, orphaned 2 times"]
    assert row.locator(".mark").count() == 1
    row.get_by_role("link", name=f"run {run}").click()
    page.wait_for_url(f"{server.url}/runs/{run}")
    assert page.locator("[data-field=owners]").inner_text() == chain
    assert page.locator("[data-field=attempt]").inner_text() == "3 of 3"
    attempts = [(r.locator("[data-field=owner]").inner_text(),
                 r.locator("[data-field=outcome]").inner_text())
                for r in page.locator("table.attempts tbody tr").all()]
    assert attempts == [("r1", "orphaned (its lease expired)"),
                        ("r2", "fenced out (lost its lease, gave the run back)"),
                        ("r3", "done")]
    watched.assert_clean()


def test_every_page_fits_a_phone_and_a_wide_screen(
    dsn: str, web_server: Callable[[str], Server], watched: Watched, phone: Watched,
    tmp_path: Path
) -> None:
    """Screenshots of the index, a schedule, a run with three attempts and a dead fleet's
    schedule at 1400 px and at 390 px; no page is wider than the window (wide tables and the
    timeline scroll in their own box)."""
    seeded = seed(dsn)
    seed_dead_fleet(dsn)
    server = web_server(dsn)
    shown = {"index": "/", "schedule": "/schedules/nightly",
             "run-three-attempts": f"/runs/{seeded.three_attempts}",
             "dead-fleet": "/schedules/tick", "agents": "/agents"}
    for width, watching in (("1400", watched), ("390", phone)):
        for name, path in shown.items():
            watching.goto(server.url + path)
            assert watching.overflow() == 0, (width, path)
            watching.screenshot(tmp_path / f"web-{name}-{width}.png")
        watching.assert_clean()
    phone.goto(server.url + "/schedules/nightly")
    timeline = phone.page.locator(".scroll:has(svg.timeline)")
    assert timeline.evaluate("e => e.scrollWidth > e.clientWidth")  # scrolls, not squeezed
    newest = phone.page.locator("svg.timeline rect.sq").last.bounding_box()
    assert newest is not None and 0 < newest["x"] < PHONE["width"]  # the newest shows first
    phone.goto(server.url + "/")
    strips = phone.page.locator('tr[data-job="fast"] svg.strip').all()
    assert len(strips) == 2  # 30 squares: the newer 15 wrap under the older
    older, newer = (strip.bounding_box() for strip in strips)
    assert older is not None and newer is not None and newer["y"] > older["y"]


def test_post_is_refused_and_unknown_pages_are_404s(
    dsn: str, web_server: Callable[[str], Server], watched: Watched
) -> None:
    seed(dsn)
    server = web_server(dsn)
    request = watched.page.context.request
    for path in ("/", "/api/schedules", "/schedules/nightly"):
        response = request.post(server.url + path, data="x")
        assert response.status == 405 and response.headers["allow"] == "GET, HEAD"
    watched.goto(server.url + "/schedules/nope", status=404)
    assert "no schedule named 'nope'" in watched.page.inner_text("main")
    watched.goto(server.url + "/runs/987654321", status=404)
    watched.assert_clean(expected_status=404)


def test_a_database_outage_is_a_503_page_with_one_line_and_no_password(
    web_server: Callable[[str], Server], watched: Watched
) -> None:
    server = web_server(f"postgresql://app:{PASSWORD}@127.0.0.1:{free_port()}/app")
    watched.goto(server.url + "/", status=503)
    reason = watched.page.locator("[data-field=reason]").inner_text()
    assert reason.startswith("cannot reach the database") and "\n" not in reason
    assert PASSWORD not in watched.page.content()
    watched.assert_clean(expected_status=503)
    assert PASSWORD not in server.log.read_text()
