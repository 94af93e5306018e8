"""Queued runs drain at claim speed: manual, backfilled, retried and orphaned runs are taken as
soon as slots are free, as many per pass as slots allow, without waiting for housekeeping to
say that runs want an owner, and without a statement more per scheduled fire."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from claimsched import Agent, Run
from claimsched.db import Store
from tests.helpers.polling import wait_for

from .support import runs, statuses

# The housekeeping period of the agents here: the default, so that a drain that waited for
# housekeeping to announce runs that want an owner could not finish inside DRAINED.
HOUSEKEEPING = 30.0
DRAINED = HOUSEKEEPING / 2  # seconds a backfill of BACKLOG short runs may take to drain
BACKLOG = 20


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.stop()


class Overlap:
    """Counts the handlers running at once, and the most that ever did."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def run(self, seconds: float) -> None:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(seconds)
        with self._lock:
            self.active -= 1


def _agent(agents: list[Agent], dsn: str, name: str, job: str, handler: Callable[[Run], Any],
           **spec: Any) -> Agent:
    agent = Agent(dsn, agent_id=name, max_concurrency=4, housekeeping_seconds=HOUSEKEEPING,
                  shutdown_grace_seconds=2)
    agents.append(agent)
    agent.job(job, schedule="@daily", **spec)(handler)
    agent.start()
    return agent


def _past_days(store: Store, count: int) -> list[datetime]:
    """The last `count` daily occurrences before today's (midnight UTC)."""
    today = store.db_now().replace(hour=0, minute=0, second=0, microsecond=0)
    return [today - timedelta(days=n) for n in range(count, 0, -1)]


def _reclaims_of(agent: Agent) -> list[int]:
    """How many runs each reclaim statement of `agent` took, in order (from now on)."""
    reclaims: list[int] = []
    reclaim = agent.store.claims.reclaim

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = reclaim(*args, **kwargs)
        reclaims.append(len(found))
        return found

    agent.store.claims.reclaim = counted  # type: ignore[method-assign]
    return reclaims


def _drained(dsn: str, job: str) -> bool:
    return statuses(dsn, job) == ["done"] * BACKLOG


def _counts(dsn: str, job: str) -> Callable[[], str]:
    """What wait_for shows when the drain did not finish: the runs' statuses, counted."""
    return lambda: f"statuses: {dict(Counter(statuses(dsn, job)))}"


def test_an_allow_jobs_backfill_drains_max_concurrency_at_a_time_long_before_housekeeping(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    overlap = Overlap()
    _agent(agents, dsn, "a", "report", lambda run: overlap.run(0.2),
           concurrency_policy="Allow")
    store.listings.request_runs("report", _past_days(store, BACKLOG), "backfill")
    wait_for(lambda: _drained(dsn, "report"), timeout=DRAINED, log=_counts(dsn, "report"),
             what=f"{BACKLOG} backfilled runs done, with no housekeeping period in between")
    assert overlap.peak == 4  # every slot took part, never more


def test_a_forbid_jobs_backfill_drains_one_run_after_another_long_before_housekeeping(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    overlap = Overlap()
    _agent(agents, dsn, "a", "report", lambda run: overlap.run(0.05))
    store.listings.request_runs("report", _past_days(store, BACKLOG), "backfill")
    wait_for(lambda: _drained(dsn, "report"), timeout=DRAINED, log=_counts(dsn, "report"),
             what=f"{BACKLOG} backfilled runs done, with no housekeeping period in between")
    assert overlap.peak == 1
    rows = runs(dsn, "report")
    assert all(a["finished_at"] <= b["started_at"] for a, b in pairwise(rows))
    gaps = [(b["started_at"] - a["finished_at"]).total_seconds() for a, b in pairwise(rows)]
    assert max(gaps) < HOUSEKEEPING / 3  # the next one starts when the last ends, not later


def test_every_agent_takes_part_in_a_big_backfill(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    """request_runs' NOTIFY wakes every agent, and each keeps taking runs while some wait."""
    for name in ("a", "b"):
        _agent(agents, dsn, name, "report", lambda run: time.sleep(0.2),
               concurrency_policy="Allow")
    store.listings.request_runs("report", _past_days(store, BACKLOG), "backfill")
    wait_for(lambda: _drained(dsn, "report"), timeout=DRAINED, log=_counts(dsn, "report"),
             what=f"{BACKLOG} backfilled runs done, with no housekeeping period in between")
    owners = [r["claimed_by"] for r in runs(dsn, "report")]
    assert set(owners) == {"a", "b"}


def test_a_retried_run_and_the_runs_queued_behind_it_are_taken_as_they_fall_due(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    """A failure due for a retry is reclaimed at its time; the backlog of its Forbid job waits
    for it and then drains, all without housekeeping."""
    failed = threading.Event()

    def flaky(run: Run) -> None:
        if not failed.is_set():
            failed.set()
            raise ValueError("the upstream service is down")

    agent = Agent(dsn, agent_id="a", max_concurrency=4, housekeeping_seconds=HOUSEKEEPING,
                  retry_backoff_seconds=0.2, shutdown_grace_seconds=2)
    agents.append(agent)
    agent.job("report", schedule="@daily", retry_on_failure=True, max_attempts=3)(flaky)
    agent.start()
    store.listings.request_runs("report", _past_days(store, BACKLOG), "backfill")
    wait_for(lambda: _drained(dsn, "report"), timeout=DRAINED, log=_counts(dsn, "report"),
             what=f"{BACKLOG} backfilled runs done, the failed one retried")
    assert sorted(r["attempt"] for r in runs(dsn, "report"))[-1] == 2


def test_scheduled_runs_that_end_send_no_reclaim(
    dsn: str, agents: list[Agent]
) -> None:
    """Looking for runs that want an owner follows what reclaims started, never the scheduled
    fires: those cost no statement more."""
    agent = Agent(dsn, agent_id="a", max_concurrency=4, housekeeping_seconds=HOUSEKEEPING,
                  shutdown_grace_seconds=2)
    agents.append(agent)
    agent.job("tick", schedule="@every 1s")(lambda run: None)
    reclaims = _reclaims_of(agent)
    agent.start()
    wait_for(lambda: statuses(dsn, "tick").count("done") >= 3, what="three scheduled runs")
    assert reclaims == [0]  # the one look at start


def test_a_forbid_jobs_lone_request_looks_once_more_when_it_ends_and_then_stops(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    """Forbid may have held runs back behind the one it started, so its end looks again; a
    look that finds nothing ends the looking."""
    agent = Agent(dsn, agent_id="a", max_concurrency=4, housekeeping_seconds=HOUSEKEEPING,
                  shutdown_grace_seconds=2)
    agents.append(agent)
    agent.job("report", schedule="@yearly")(lambda run: None)
    reclaims = _reclaims_of(agent)
    agent.start()
    store.listings.request_runs("report", [store.db_now()], "manual")

    def looked_again() -> list[int] | None:
        """After the look that took the request, one that found nothing (a housekeeping sweep
        that raced with the request may have looked once more: not counted)."""
        taken = reclaims.index(1) if 1 in reclaims else None
        done = statuses(dsn, "report") == ["done"]
        return list(reclaims) if done and taken is not None and 0 in reclaims[taken:] else None

    seen = wait_for(looked_again, what="the request's look, then one more",
                    log=lambda: f"reclaims: {reclaims}")
    time.sleep(1.0)  # the quiet being checked: nothing more may happen
    assert reclaims == seen and len(seen) <= 4, seen


def test_a_forbid_jobs_backlog_does_not_hold_back_the_other_jobs_queued_runs(
    dsn: str, store: Store, agents: list[Agent]
) -> None:
    """Forbid starts one run of a job at a time, but the runs of its backlog that must wait are
    not what a reclaim takes its slots' worth of: another job's request, queued after them,
    starts on a free slot while the backlog's first run is still in progress."""
    release = threading.Event()
    agent = Agent(dsn, agent_id="a", max_concurrency=4, housekeeping_seconds=HOUSEKEEPING,
                  shutdown_grace_seconds=2)
    agents.append(agent)
    agent.job("report", schedule="@daily")(lambda run: release.wait(DRAINED * 2))
    agent.job("ping", schedule="@yearly")(lambda run: None)
    agent.start()
    try:
        store.listings.request_runs("report", _past_days(store, BACKLOG), "backfill")
        wait_for(lambda: "running" in statuses(dsn, "report"), what="the backlog's first run")
        store.listings.request_runs("ping", [store.db_now()], "manual")
        wait_for(lambda: statuses(dsn, "ping") == ["done"], timeout=DRAINED,
                 log=lambda: f"ping: {statuses(dsn, 'ping')}",
                 what="the other job's request done while the Forbid backlog waits")
        assert statuses(dsn, "report").count("running") == 1
    finally:
        release.set()
