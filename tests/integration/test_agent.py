"""The agent in-process on a real Postgres: handlers, schedules, policies, attempts, metrics."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from claimsched import Agent, ConfigurationError, InvalidSchedule, InvalidSpec, Run
from claimsched.db import Store
from claimsched.db.arrays import claim_params
from claimsched.db.queries import call
from claimsched.schedule.specs import job_spec
from claimsched.tools.postgres import free_port
from tests.helpers.polling import wait_for

from .support import due, past, runs, sql, statuses

FAST = {"housekeeping_seconds": 0.3, "retry_backoff_seconds": 0.1, "shutdown_grace_seconds": 2}


@pytest.fixture
def agents(dsn: str) -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.stop()


def make(agents: list[Agent], dsn: str, name: str = "a", **settings: Any) -> Agent:
    agent = Agent(dsn, agent_id=name, **{**FAST, **settings})
    agents.append(agent)
    return agent


def test_sync_and_async_handlers_run_on_their_code_declared_schedules(
    dsn: str, agents: list[Agent]
) -> None:
    agent = make(agents, dsn)
    seen: list[str] = []

    @agent.job("sync_job", schedule="@every 1s")
    def sync_job(run: Run) -> None:
        seen.append(f"sync {run.attempt}")

    @agent.job("async_job", schedule="@every 1s")
    async def async_job(run: Run) -> None:
        await asyncio.sleep(0.01)
        seen.append(f"async {run.attempt}")

    agent.start()
    wait_for(lambda: {"sync 1", "async 1"} <= set(seen), what="both handlers")
    rows = sql(dsn, "SELECT job_name, source FROM job_schedule ORDER BY 1")
    assert rows == [("async_job", "code"), ("sync_job", "code")]


def test_a_handler_without_a_schedule_warns_once_and_runs_when_one_arrives(
    dsn: str, store: Store, agents: list[Agent], caplog: pytest.LogCaptureFixture
) -> None:
    agent = make(agents, dsn, schedule_refresh_seconds=3600)
    ran = threading.Event()
    agent.job("later")(lambda run: ran.set())
    with caplog.at_level(logging.WARNING, logger="claimsched"):
        agent.start()
        wait_for(lambda: "no schedule yet" in caplog.text, what="the warning")
        store.schedules.upsert(job_spec(job_name="later", schedule="@every 1s", source="cli"))
        assert ran.wait(5), "the schedule arrived through NOTIFY and the job ran"
    assert caplog.text.count("no schedule yet") == 1


def test_a_suspended_schedule_does_not_run_or_catch_up_after_it_resumes(
    dsn: str, agents: list[Agent]
) -> None:
    agent = make(agents, dsn)
    agent.job("tick", schedule="@every 1s", catch_up_policy="All")(lambda run: None)
    agent.signals.test.init()
    agent.start()
    agent.signals.test.run_ended.wait(30)
    assert "done" in statuses(dsn, "tick"), "a first run"
    sql(dsn, "UPDATE job_schedule SET enabled = false")
    suspended_at = sql(dsn, "SELECT now()")[0][0]
    time.sleep(3)  # the suspension itself: three periods with nothing allowed to happen
    sql(dsn, "UPDATE job_schedule SET enabled = true")
    resumed_at = sql(dsn, "SELECT now()")[0][0]
    wait_for(lambda: any(r["fire_time"] > resumed_at for r in runs(dsn, "tick")), what="resume")
    during = [r for r in runs(dsn, "tick") if suspended_at + _s(1) < r["fire_time"] <= resumed_at]
    assert during == []


def _s(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)


def test_forbid_records_overlapping_occurrences_as_skipped(dsn: str, agents: list[Agent]) -> None:
    agent = make(agents, dsn)
    agent.job("slow", schedule="@every 1s", lease_seconds=6, heartbeat_seconds=2)(
        lambda run: time.sleep(2.2)
    )
    agent.start()
    wait_for(lambda: Counter(statuses(dsn, "slow"))["skipped"] >= 2, what="skipped overlaps")
    concurrent = sql(dsn, "SELECT count(*) FROM job_runs WHERE status = 'running'")
    assert concurrent[0][0] <= 1
    reasons = {r["error"] for r in runs(dsn, "slow") if r["status"] == "skipped"}
    assert reasons == {"skipped: the previous run is still running (concurrencyPolicy Forbid)"}


def test_allow_runs_occurrences_side_by_side(dsn: str, agents: list[Agent]) -> None:
    agent = make(agents, dsn)
    active, peak = [0], [0]
    lock = threading.Lock()

    @agent.job(
        "slow",
        schedule="@every 1s",
        concurrency_policy="Allow",
        lease_seconds=6,
        heartbeat_seconds=2,
    )
    def slow(run: Run) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(2.5)
        with lock:
            active[0] -= 1

    agent.start()
    wait_for(lambda: peak[0] >= 2, what="two runs at once")
    assert "skipped" not in statuses(dsn, "slow")


def test_replace_fences_out_the_running_occurrence(dsn: str, agents: list[Agent]) -> None:
    agent = make(agents, dsn)
    lost: list[bool] = []

    @agent.job(
        "slow",
        schedule="@every 2s",
        concurrency_policy="Replace",
        lease_seconds=9,
        heartbeat_seconds=3,
    )
    def slow(run: Run) -> None:
        lost.append(run.lost.wait(6))

    agent.start()
    wait_for(lambda: lost and lost[0], timeout=15, what="the first run to be told it was replaced")
    first = runs(dsn, "slow")[0]
    assert first["status"] == "failed" and "replaced by" in first["error"]


def test_failures_are_retried_with_backoff_until_attempts_run_out(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    agent = make(agents, dsn)
    attempts: list[int] = []

    @agent.job("flaky", schedule="@yearly", retry_on_failure=True, max_attempts=3)
    def flaky(run: Run) -> None:
        attempts.append(run.attempt)
        raise ValueError("the upstream service is down")

    agent.signals.test.init()
    agent.start()
    store.listings.request_runs("flaky", [store.db_now()], "manual")
    ended = [agent.signals.test.run_ended.wait(30) for _ in range(3)]
    assert [lease.attempt for lease in ended] == [1, 2, 3], "three attempts"
    assert runs(dsn)[0]["retry_at"] is None and runs(dsn)[0]["status"] == "failed"
    # failed with no retry_at: nothing can claim a fourth attempt (reclaim needs retry_at)
    assert attempts == [1, 2, 3]
    assert "ValueError: the upstream service is down" in runs(dsn)[0]["error"]


def test_a_run_past_max_runtime_is_failed_and_told_it_lost_its_lease(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    agent = make(agents, dsn)
    told = threading.Event()
    agent.job("hang", schedule="@yearly", max_runtime_seconds=1)(
        lambda run: told.set() if run.lost.wait(10) else None
    )
    agent.start()
    store.listings.request_runs("hang", [store.db_now()], "manual")
    assert told.wait(10)
    (row,) = runs(dsn, "hang")
    assert row["status"] == "failed" and "max_runtime of 1 s exceeded" in row["error"]


def test_an_occurrence_another_claim_was_inserting_is_claimed_once_that_claim_rolls_back(
    dsn: str, agents: list[Agent]
) -> None:
    fields: dict[str, Any] = {"catch_up_policy": "All", "catch_up_window_seconds": 0,
                              "concurrency_policy": "Allow"}
    store = Store(dsn)
    store.open()
    try:
        store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s", source="code",
                                       **fields))
        sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
        held = past(1)
        with psycopg.connect(dsn) as racing:  # its claim of `held` stays uncommitted
            racing.execute("SET search_path = claimsched, public")
            racing.execute(call("cs_claim_v2"), claim_params("racing", due(store, "job", held), 4))
            agent = make(agents, dsn)
            agent.job("job", schedule="@every 1s", **fields)(lambda run: None)
            agent.start()
            wait_for(lambda: [r for r in runs(dsn, "job") if r["fire_time"] > held],
                     what="a later occurrence claimed while the held one is in flight", timeout=5)
            assert held not in {r["fire_time"] for r in runs(dsn, "job")}
            racing.rollback()
        claimed = wait_for(lambda: [r for r in runs(dsn, "job") if r["fire_time"] == held],
                           what="the held occurrence claimed by the agent", timeout=5)
    finally:
        store.close()
    assert [r["claimed_by"] for r in claimed] == ["a"]


def test_trigger_and_backfill_requests_run_exactly_once_across_agents(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    ran: list[tuple[str, str]] = []
    lock = threading.Lock()
    for name in ("a", "b", "c"):
        agent = make(agents, dsn, name)

        @agent.job("report", schedule="@yearly")
        def report(run: Run, _name: str = name) -> None:
            with lock:
                ran.append((run.kind, run.fire_time.isoformat()))

        agent.start()
    times = [store.db_now() - _s(3600 * h) for h in (1, 2, 3)]
    store.listings.request_runs("report", times, "backfill")
    store.listings.request_runs("report", [store.db_now()], "manual")
    wait_for(
        lambda: [r["status"] for r in runs(dsn, "report")] == ["done"] * 4,
        what="four runs recorded done (nothing pending is left to run again)",
    )
    assert len(ran) == len(set(ran)) == 4
    assert Counter(kind for kind, _ in ran) == {"backfill": 3, "manual": 1}


def test_metrics_are_served_on_the_opt_in_port(dsn: str, agents: list[Agent]) -> None:
    port = free_port()
    agent = make(agents, dsn, metrics_port=port)
    agent.job("tick", schedule="@every 1s")(lambda run: None)
    agent.signals.test.init()
    agent.start()
    agent.signals.test.run_ended.wait(30)
    assert "done" in statuses(dsn, "tick"), "a run"

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as response:
            return str(response.read().decode())

    text = wait_for(lambda: "claimsched_runs_total" in scrape() and scrape(), what="metrics")
    assert 'claimsched_claims_total{job="tick",outcome="claimed"}' in text
    assert "claimsched_fire_to_start_seconds_bucket" in text
    assert 'claimsched_run_duration_seconds_count{job="tick",status="done"}' in text


def test_lease_tokens_never_show_in_logs_metrics_or_the_runs_listing(
    dsn: str, store: Store, agents: list[Agent], caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    agent = make(agents, dsn, metrics_port=port)
    handler_saw: list[str] = []

    @agent.job("tick", schedule="@every 1s")
    def tick(run: Run) -> None:
        run.effect("mail")
        run.log.info("ran %r", run)
        handler_saw.append(repr(run))

    agent.signals.test.init()
    with caplog.at_level(logging.DEBUG):
        agent.start()
        for _ in range(2):
            agent.signals.test.run_ended.wait(30)
        assert statuses(dsn, "tick").count("done") >= 2, "two runs"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as response:
            scraped = response.read().decode()
        agent.stop()
    tokens = [str(row[0]) for row in sql(dsn, "SELECT lease_token FROM job_runs"
                                              " WHERE lease_token IS NOT NULL")]
    assert len(tokens) >= 2 and handler_saw
    said = "\n".join([caplog.text, scraped, *handler_saw,
                      *(str(vars(record)) for record in caplog.records),
                      str(store.listings.runs("tick"))])
    assert [token for token in tokens if token in said] == []


def test_configuration_mistakes_are_clear_errors(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAIMSCHED_DSN", raising=False)
    with pytest.raises(ConfigurationError, match="no database"):
        Agent()
    agent = Agent(dsn)
    with pytest.raises(InvalidSchedule, match="minute field '99'"):
        agent.job("bad", schedule="99 * * * *")
    with pytest.raises(InvalidSpec, match="invalid job name"):
        agent.job("semi;colon")
    with pytest.raises(ConfigurationError, match="no jobs"):
        agent.start()


def test_a_run_that_ends_does_not_wake_the_claim_loop_when_no_work_waits_for_a_slot(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    agent = make(agents, dsn)
    release = threading.Event()
    # Allow: the reclaim that took the run left nothing behind it (it took fewer than it asked
    # for). A Forbid job's run may hold others back, and its end looks once more (test_drain).
    agent.job("report", schedule="@yearly", concurrency_policy="Allow")(
        lambda run: release.wait(10))
    signals = agent.signals
    freed = signals.slot_freed
    woke: list[bool] = []  # per freed slot: whether that signal woke the claim loop

    def observed() -> None:
        waiting = not signals.wake.is_set()
        freed()
        woke.append(waiting and signals.wake.is_set())

    signals.slot_freed = observed  # type: ignore[method-assign]
    signals.test.init()
    agent.start()
    store.listings.request_runs("report", [store.db_now()], "manual")
    wait_for(lambda: statuses(dsn, "report") == ["running"], what="the manual run")
    release.set()
    signals.test.run_ended.wait(30)
    assert statuses(dsn, "report") == ["done"], "its completion"
    # Each wake-up is a planner pass over every due job: with slots free and nothing due, an
    # ending run gives the loop nothing to do. (Other wake-ups may come meanwhile, for their
    # own reasons: a presence notification, a refresh.)
    assert woke == [False]


def test_races_lost_are_one_count_per_agent_not_a_series_per_job(
    dsn: str, agents: list[Agent]
) -> None:
    """With 100,000 jobs, a series per job and lost race was megabytes per agent."""
    port = free_port()
    watched = make(agents, dsn, metrics_port=port)
    other = make(agents, dsn, name="b")
    for agent in (watched, other):
        agent.job("tick", schedule="@every 1s")(lambda run: None)
        agent.start()

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as response:
            return str(response.read().decode())

    def lost() -> str | None:
        text = scrape()
        return text if re.search(r"^claimsched_claims_lost_total [1-9]", text, re.M) else None

    text = wait_for(lost, what="a race lost to the other agent", timeout=20)
    assert 'outcome="taken"' not in text and 'outcome="contended"' not in text
