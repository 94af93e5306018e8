"""The web view on a real Postgres, served in-process: the JSON's numbers are the database's,
a page costs a fixed number of statements whatever the number of schedules, GET and HEAD only,
404s, a 503 that names the problem in one line, no password anywhere, a SELECT-only role."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql as pgsql

from claimsched.cli import main
from claimsched.db import Store, Views
from claimsched.db.queries import query
from claimsched.tools.postgres import free_port
from claimsched.web.server import make_server
from tests.helpers.web_seed import (
    HOSTILE_JOB,
    PASSWORD,
    THREE_OWNERS,
    seed,
    seed_dead_fleet,
)

from .support import sql


@dataclass
class Web:
    port: int
    views: Views

    def request(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def json(self, path: str) -> Any:
        status, _, body = self.request(path)
        assert status == 200, body[:500]
        return json.loads(body)


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start a view on a store; everything started is stopped afterwards."""
    started: list[tuple[Any, threading.Thread, Store]] = []

    def start(store: Store) -> Web:
        views = Views(store)
        server = make_server(views, "127.0.0.1", 0, (store.dsn,))
        thread = threading.Thread(target=server.serve_forever, name="web-test", daemon=True)
        thread.start()
        started.append((server, thread, store))
        return Web(server.server_address[1], views)

    yield start
    for server, thread, store in started:
        server.shutdown()
        server.server_close()
        thread.join(5)
        store.close()


@pytest.fixture
def web(dsn: str, serve: Any) -> Web:
    seed(dsn)
    return serve(Store(dsn, max_size=2, name="claimsched-web-test"))  # type: ignore[no-any-return]


def _squares(found: dict[str, Any]) -> list[dict[str, Any]]:
    return found["recent"]["occurrences"]  # type: ignore[no-any-return]


def test_the_overview_counts_are_the_database_runs_of_its_window(web: Web, dsn: str) -> None:
    data = web.json("/api/schedules")
    jobs = {s["job"]: s for s in data["schedules"]}
    assert set(jobs) == {"fast", "nightly", "paused", "spring", HOSTILE_JOB}
    for job in ("fast", "nightly"):
        squares = _squares(jobs[job])
        oldest = squares[0]["fire_time"]
        rows = sql(dsn, "SELECT count(*) FILTER (WHERE status = 'done'), "
                        "       count(*) FILTER (WHERE status = 'failed'), "
                        "       count(*) FILTER (WHERE status = 'skipped'), "
                        "       count(*) FILTER (WHERE attempt > 1 OR orphan_count > 0), "
                        "       count(*) FILTER (WHERE status = 'running'), count(*), "
                        "       max(fire_time) FILTER (WHERE status = 'done') "
                        "FROM job_runs WHERE job_name = %s AND fire_time >= %s", [job, oldest])
        done, failed, skipped, retried, running, runs, last_done = rows[0]
        counts = jobs[job]["recent"]["counts"]
        assert (counts["done"], counts["failed"], counts["skipped"], counts["running"],
                jobs[job]["recent"]["retried"]) == (done, failed, skipped, running, retried), job
        assert retried > 0 and sum(s["retried"] for s in squares) == retried, job
        assert counts["missed"] + counts["due"] == len(squares) - runs
        assert jobs[job]["last_success"] == last_done.isoformat()
        assert [s["run"]["id"] for s in squares if "run" in s] == [
            r[0] for r in sql(dsn, "SELECT id FROM job_runs WHERE job_name = %s "
                                   "AND fire_time >= %s ORDER BY fire_time", [job, oldest])]
    fast = _squares(jobs["fast"])
    assert len(fast) == 30 and fast[-1]["class"] == "running"
    assert jobs["fast"]["recent"]["counts"]["missed"] >= 4  # one in seven slots has no run
    nightly = jobs["nightly"]["recent"]["counts"]
    assert nightly["missed"] >= 3 and nightly["done"] == 6 and jobs["nightly"]["recent"][
        "retried"] == 1
    assert jobs["paused"]["state"] == "suspended" and jobs["paused"]["next_fire"] is None
    assert (jobs["paused"]["verdict"], jobs["fast"]["verdict"]) == ("suspended", "running")
    assert jobs["nightly"]["description"] == "At 02:00, every day"
    assert jobs["nightly"]["next_fire"]["local"][11:16] == "02:00"
    assert jobs["nightly"]["live_agents"] == 1 and jobs["paused"]["live_agents"] == 0


def test_each_occurrence_names_who_ran_each_attempt_and_is_marked_when_it_took_more(
    web: Web, dsn: str
) -> None:
    (three, fire), = sql(dsn, "SELECT id, fire_time FROM job_runs WHERE job_name = 'nightly' "
                              "AND attempt = 3")
    overview = {s["job"]: s for s in web.json("/api/schedules")["schedules"]}
    timeline = web.json("/api/schedules/nightly")["timeline"]["occurrences"]
    for squares in (_squares(overview["nightly"]), timeline):
        square, = [s for s in squares if s.get("run", {}).get("id") == three]
        assert (square["class"], square["retried"]) == ("done", True)
        assert square["fire_time"] == fire.isoformat()
        assert square["run"]["owners"] == list(THREE_OWNERS)
        others = [s for s in squares if "run" in s and s["run"]["id"] != three]
        assert others and all(s["run"]["owners"] == ["agent-live"] and not s["retried"]
                              for s in others)
    fast = [s for s in _squares(overview["fast"]) if s["retried"]]
    assert fast and all(s["class"] == "done" and s["run"]["owners"] == ["agent-gone", "agent-live"]
                        for s in fast)
    run = web.json(f"/api/runs/{three}")
    assert run["owners"] == list(THREE_OWNERS)
    assert [(a["attempt"], a["claimed_by"], a["outcome"]) for a in run["attempts"]] == [
        (1, "r1", "orphaned"), (2, "r2", "fenced_out"), (3, "r3", "done")]
    _, _, page = web.request("/")
    assert "ran by r1 → r2 → r3 (3 attempts, orphaned 2 times)" in page.decode()


def test_the_owners_of_earlier_attempts_are_read_by_primary_key_not_by_a_scan(
    web: Web, dsn: str
) -> None:
    sql(dsn, "INSERT INTO job_attempts (job_name, fire_time, attempt, run_id, claimed_by, "
             "outcome) SELECT 'other' || (g % 100), now() - make_interval(secs => g), 1, g, "
             "'agent-x', 'orphaned' FROM generate_series(1, 50000) g")
    sql(dsn, "ANALYZE job_attempts")
    since = datetime.fromisoformat(sql(dsn, "SELECT (now() - interval '7 days')::text")[0][0])
    for name, params in (("web_schedules", {"job_name": None, "recent": 30}),
                         ("web_schedule_runs", {"job_name": "nightly", "since": since,
                                                "limit": 500})):
        statement = query(name)
        assert isinstance(statement, str)
        plan = "\n".join(row[0] for row in sql(dsn, "EXPLAIN " + statement, params))
        assert "job_attempts_pkey" in plan and "Seq Scan on job_attempts" not in plan, plan
    assert web.json("/api/schedules/nightly")["timeline"]["retried"] == 1


def test_a_hashed_schedule_shows_its_resolved_expression(web: Web, dsn: str) -> None:
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule) VALUES ('daily_report', 'H 2 * * *')")
    data = web.json("/api/schedules/daily_report")
    assert (data["schedule"], data["resolved_schedule"]) == ("H 2 * * *", "44 2 * * *")
    assert data["description"] == "At 02:44, every day" and data["problem"] is None
    status, _, body = web.request("/schedules/daily_report")
    assert status == 200 and b'data-resolved="44 2 * * *"' in body


def test_a_schedule_timeline_counts_its_runs_and_its_missed_occurrences(
    web: Web, dsn: str
) -> None:
    data = web.json("/api/schedules/nightly")
    counts = data["timeline"]["counts"]
    since = data["timeline"]["since"]
    rows = sql(dsn, "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FROM job_runs "
                    "WHERE job_name = 'nightly' AND fire_time > %s", [since])
    done_all, runs = rows[0]
    assert counts["done"] == done_all and data["timeline"]["retried"] == 1
    assert sum(counts.values()) - counts["missed"] - counts["due"] == runs
    assert len(data["next_fires"]) == 10
    assert all(f["local"][11:16] == "02:00" for f in data["next_fires"])
    assert all(f["clock_change"] is None or f["clock_change"].startswith("clocks go")
               for f in data["next_fires"])


def test_a_job_whose_fleet_is_gone_is_late_and_unhealthy_in_the_json_and_the_pages(
    dsn: str, serve: Any
) -> None:
    last = seed_dead_fleet(dsn)
    web = serve(Store(dsn, max_size=2, name="claimsched-web-test"))
    overview = web.json("/api/schedules")
    listed = {s["job"]: s for s in overview["schedules"]}["tick"]
    detail = web.json("/api/schedules/tick")
    for found, at in ((listed, overview["now"]), (detail, detail["now"])):
        assert (found["verdict"], found["healthy"], found["live_agents"]) == ("late", False, 0)
        assert set(found["reasons"]) == {"late", "no_live_agent"}
        late = found["late"]
        assert late["since"] == (last + timedelta(seconds=2)).isoformat()
        assert late["seconds"] >= 60 > late["grace_seconds"] > 0
        # Every square without a run past its grace is late; none is missed yet.
        now = datetime.fromisoformat(at)
        grace = timedelta(seconds=late["grace_seconds"])
        for square in found["recent"]["occurrences"]:
            fire = datetime.fromisoformat(square["fire_time"])
            if "run" not in square:
                assert square["class"] == ("late" if fire <= now - grace else "due"), square
        assert found["recent"]["counts"]["late"] > 0 == found["recent"]["counts"]["missed"]
    assert detail["timeline"]["counts"]["late"] > 0
    _, _, page = web.request("/")
    row = page.decode().split('<tr data-job="tick">')[1].split("</tr>")[0]
    assert 'data-field="health"' in row and "late" in row and "no live agent" in row
    assert 'class="sq late"' in row
    assert '<span data-count="unhealthy">1 unhealthy</span>' in page.decode()
    _, _, page = web.request("/schedules/tick")
    health = page.decode().split('data-field="health"')[1].split("</dd>")[0]
    assert "late" in health and "no live agent" in health


def test_a_run_shows_its_attempts_owner_receipts_and_a_redacted_error(web: Web, dsn: str) -> None:
    run_id, = sql(dsn, "SELECT id FROM job_runs WHERE job_name = %s AND status = 'failed'",
                  [HOSTILE_JOB])[0]
    data = web.json(f"/api/runs/{run_id}")
    assert data["job"] == HOSTILE_JOB and data["status"] == "failed"
    assert data["claimed_by"] == "agent-live" and data["duration_seconds"] == 2.0
    assert PASSWORD not in data["error"] and "postgresql://app:***@db:5432/app" in data["error"]
    assert data["error"].startswith("<img src=x onerror=alert(2)>")  # JSON keeps it as text
    newest, = sql(dsn, "SELECT id FROM job_runs WHERE job_name = 'nightly' "
                       "ORDER BY fire_time DESC LIMIT 1")[0]
    receipts = web.json(f"/api/runs/{newest}")["effects"]
    assert receipts["count"] == 3
    assert sorted(e["entity"] for e in receipts["shown"]) == ["mail:1", "mail:2", "mail:3"]


def test_agents_are_live_or_gone_by_their_own_presence(web: Web) -> None:
    agents = {a["agent_id"]: a for a in web.json("/api/agents")["agents"]}
    assert agents["agent-live"]["alive"] is True
    assert agents["agent-live"]["handlers"] == ["nightly", "fast"]
    assert agents["agent-gone"]["alive"] is False and agents["agent-gone"]["version"] == "0.0.9"


def test_a_page_costs_the_same_statements_with_5_schedules_as_with_65(web: Web, dsn: str) -> None:
    run_id = sql(dsn, "SELECT min(id) FROM job_runs")[0][0]
    pages = {"/": 1, "/api/schedules": 1, "/schedules/fast": 2, "/api/schedules/nightly": 2,
             f"/runs/{run_id}": 1, "/agents": 1}

    def costs() -> dict[str, int]:
        found = {}
        for path in pages:
            before = web.views.statements
            status, _, _ = web.request(path)
            assert status == 200, path
            found[path] = web.views.statements - before
        return found

    assert costs() == pages
    sql(dsn, "INSERT INTO job_schedule (job_name, schedule) "
             "SELECT 'more' || g, '*/15 * * * *' FROM generate_series(1, 60) g")
    sql(dsn, "INSERT INTO job_runs (job_name, fire_time, status) SELECT 'more' || g, "
             "date_trunc('hour', now()) - make_interval(mins => 15 * k), 'done' "
             "FROM generate_series(1, 60) g, generate_series(1, 40) k")
    assert costs() == pages
    assert len(web.json("/api/schedules")["schedules"]) == 65


@pytest.mark.parametrize(
    "path",
    ["/nothing", "/schedules/nope", f"/schedules/{quote('<b>x</b>', safe='')}", "/runs/abc",
     "/runs/0", "/runs/99999999999999999999999", "/runs/-1", "/api/runs/12345678",
     "/api/schedules/nope", "/api/nothing"],
)
def test_an_unknown_page_job_or_run_is_a_404(web: Web, path: str) -> None:
    status, headers, body = web.request(path)
    assert status == 404
    if path.startswith("/api/"):
        assert headers["Content-Type"] == "application/json" and json.loads(body)["status"] == 404
    else:
        assert b"<b>" not in body and b"404 Not Found" in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_every_method_but_get_and_head_is_refused_with_405(web: Web, method: str) -> None:
    for path in ("/", "/api/schedules", "/nothing"):
        status, headers, _ = web.request(path, method)
        assert status == 405 and headers["Allow"] == "GET, HEAD", (method, path)


def test_head_answers_the_headers_of_get_without_a_body(web: Web) -> None:
    status, headers, body = web.request("/api/agents", "HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def test_every_answer_carries_the_security_headers(web: Web) -> None:
    for path, method in [("/", "GET"), ("/api/schedules", "GET"), ("/nothing", "GET"),
                         ("/", "POST")]:
        _, headers, _ = web.request(path, method)
        policy = headers["Content-Security-Policy"]
        assert policy.startswith("default-src 'none'; style-src 'sha256-")
        assert "script-src" not in policy and "img-src data:" in policy
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Server"] == "claimsched-web"


def test_a_hostile_job_name_and_error_are_escaped_in_the_html(web: Web, dsn: str) -> None:
    _, _, overview = web.request("/")
    assert b"<script>" not in overview and b"&lt;script&gt;alert(1)&lt;/script&gt;" in overview
    run_id, = sql(dsn, "SELECT id FROM job_runs WHERE job_name = %s AND status = 'failed'",
                  [HOSTILE_JOB])[0]
    status, _, page = web.request(f"/runs/{run_id}")
    assert status == 200 and b"<img" not in page and b"&lt;img src=x onerror=alert(2)&gt;" in page
    status, _, page = web.request("/schedules/" + quote(HOSTILE_JOB, safe=""))
    assert status == 200 and b"<script>" not in page and PASSWORD.encode() not in page


def test_a_database_that_cannot_be_reached_is_a_503_in_one_line_without_the_password(
    serve: Any,
) -> None:
    dsn = f"postgresql://app:{PASSWORD}@127.0.0.1:{free_port()}/app?connect_timeout=2"
    web = serve(Store(dsn, max_size=1, name="claimsched-web-test"))
    for path in ("/", "/api/schedules", "/agents", "/runs/1"):
        status, _, body = web.request(path)
        assert status == 503, path
        text = body.decode()
        assert "cannot reach the database" in text and PASSWORD not in text
        assert "Traceback" not in text and "File \"" not in text
    reason = json.loads(web.request("/api/agents")[2])["error"]
    assert "\n" not in reason


def test_a_schema_without_claimscheds_tables_is_a_503_saying_where_they_are(
    dsn: str, serve: Any
) -> None:
    web = serve(Store(dsn, schema="claimsced", max_size=1, name="claimsched-web-test"))
    status, _, body = web.request("/api/schedules")
    reason = json.loads(body)["error"]
    assert status == 503 and "\n" not in reason
    assert "pass --schema claimsched" in reason and "SELECT" not in reason


def test_the_view_needs_nothing_but_select(dsn: str, serve: Any) -> None:
    seed(dsn)
    name = f"viewer_{free_port()}"
    role = pgsql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN").format(role))
        try:
            admin.execute(pgsql.SQL("GRANT USAGE ON SCHEMA claimsched TO {}").format(role))
            admin.execute(pgsql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA claimsched TO {}")
                          .format(role))
            store = Store(psycopg.conninfo.make_conninfo(dsn, user=name),
                          max_size=1, name="claimsched-web-test")
            web = serve(store)
            run_id = sql(dsn, "SELECT min(id) FROM job_runs")[0][0]
            for path in ("/", "/schedules/nightly", f"/runs/{run_id}", "/agents",
                         "/api/schedules"):
                assert web.request(path)[0] == 200, path
            store.close()
        finally:
            admin.execute(pgsql.SQL("DROP OWNED BY {}").format(role))
            admin.execute(pgsql.SQL("DROP ROLE {}").format(role))


@pytest.mark.parametrize("bind", ["nonsense", "127.0.0.1:", ":8080", "127.0.0.1:70000"])
def test_a_bad_bind_address_is_a_one_line_error(
    bind: str, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--dsn", dsn, "--bind", bind]) == 1
    err = capsys.readouterr().err
    assert err.startswith("claimsched: error: invalid --bind") and err.count("\n") == 1


def test_a_port_in_use_is_a_one_line_error(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["web", "--dsn", dsn, "--bind", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"claimsched: error: cannot listen on 127.0.0.1:{port}")
