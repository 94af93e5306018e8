"""An agent's presence row on a real Postgres: its job list is written once, not every sweep,
and which runs it may take (housekeeping's and the poll's `claimable`) is read from the row."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from claimsched import Agent
from claimsched.db import Store
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for

from .support import PRESENCE, past, sql


def _handlers(store: Store, agent_id: str) -> list[str] | None:
    found = sql(store.dsn, "SELECT handlers FROM agents WHERE agent_id = %s", [agent_id])
    return found[0][0] if found else None


def _wanting_an_owner(store: Store, job: str) -> None:
    """A requested run of `job` that is due: any agent with its handler may take it."""
    store.schedules.upsert(job_spec(job_name=job, schedule="@daily"))
    store.listings.request_runs(job, [past(5)], "manual")


def test_a_sweep_without_the_job_list_keeps_the_one_the_row_holds(store: Store) -> None:
    assert store.claims.housekeeping("a", ["x", "y"], PRESENCE).present
    found = store.claims.housekeeping("a", None, PRESENCE)
    assert found.present and not found.claimable
    assert _handlers(store, "a") == ["x", "y"]
    assert [a.handlers for a in store.listings.agents()] == [["x", "y"]]
    _wanting_an_owner(store, "y")
    assert store.claims.housekeeping("a", None, PRESENCE).claimable  # y is in a's row
    store.claims.housekeeping("b", ["z"], PRESENCE)
    assert not store.claims.housekeeping("b", None, PRESENCE).claimable  # b has no handler for y


def test_a_row_without_its_job_list_says_so_until_the_list_is_sent(store: Store) -> None:
    store.claims.housekeeping("a", ["x"], PRESENCE)
    sql(store.dsn, "DELETE FROM agents")
    _wanting_an_owner(store, "x")
    found = store.claims.housekeeping("a", None, PRESENCE)
    assert not found.present and not found.claimable
    assert _handlers(store, "a") == []
    found = store.claims.housekeeping("a", ["x"], PRESENCE)
    assert found.present and found.claimable
    assert _handlers(store, "a") == ["x"]


def test_the_poll_asks_about_the_jobs_in_the_agents_row(store: Store) -> None:
    store.claims.housekeeping("a", ["x"], PRESENCE)
    store.claims.housekeeping("b", ["z"], PRESENCE)
    _wanting_an_owner(store, "x")
    assert store.claims.poll("a")[1]
    assert not store.claims.poll("b")[1]
    assert not store.claims.poll(None)[1]


@pytest.fixture
def agent(dsn: str) -> Iterator[Agent]:
    made = Agent(dsn, agent_id="a", housekeeping_seconds=0.3, shutdown_grace_seconds=1)
    yield made
    made.stop()


def test_an_agent_whose_row_is_gone_writes_its_job_list_again(dsn: str, agent: Agent) -> None:
    for name in ("x", "y"):
        agent.job(name, schedule="@daily")(lambda run: None)
    agent.start()
    store = agent.store
    assert _handlers(store, "a") == ["x", "y"]
    sql(dsn, "DELETE FROM agents")
    wait_for(lambda: _handlers(store, "a") == ["x", "y"], timeout=10, what="the list again")
    _wanting_an_owner(store, "y")
    wait_for(lambda: sql(dsn, "SELECT 1 FROM job_runs WHERE job_name = 'y'"
                              " AND status IN ('running', 'done')"),
             timeout=10, what="the requested run taken")


def test_peers_are_the_live_agents_with_the_same_jobs_each_one_among_them(store: Store) -> None:
    """Each occurrence's first claimer is one of these (turns.py): every replica of a
    deployment must read the same list, sorted, and nobody who is gone, stopped or has other
    jobs."""
    assert store.claims.housekeeping("b", ["x", "y"], PRESENCE).peers == ("b",)
    assert store.claims.housekeeping("a", ["x", "y"], PRESENCE).peers == ("a", "b")
    assert store.claims.housekeeping("c", ["x"], PRESENCE).peers == ("c",)  # other jobs
    for agent in ("d", "e"):
        store.claims.housekeeping(agent, ["x", "y"], PRESENCE)
    store.claims.agent_stopped("d")
    sql(store.dsn, "UPDATE agents SET last_seen = now() - interval '1 hour' WHERE agent_id = 'e'")
    # the row's list counts
    assert store.claims.housekeeping("b", None, PRESENCE).peers == ("a", "b")
    assert store.claims.housekeeping("d", None, PRESENCE).peers == ("a", "b", "d")  # back again


def test_an_agent_that_starts_or_stops_is_a_peer_of_the_others_at_once(dsn: str) -> None:
    """Its peers learn of it by a notification, not at their next sweep (30 s here): until
    then they would take its turns, or leave theirs to its hand-off."""
    agents = {name: Agent(dsn, agent_id=name, housekeeping_seconds=30) for name in "ab"}
    for agent in agents.values():
        agent.job("j")(lambda run: None)
    first = agents["a"]
    first.start()
    try:
        agents["b"].start()
        wait_for(lambda: first.claimer.planner.turns.peers == ("a", "b"), timeout=10)
        agents["b"].stop()
        wait_for(lambda: first.claimer.planner.turns.peers == ("a",), timeout=10)
    finally:
        for agent in agents.values():
            agent.stop()
