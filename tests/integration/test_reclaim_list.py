"""A reclaim without a job list: the database reads it from the agent's presence row, which
housekeeping keeps (with 100,000 jobs the list was megabytes per reclaim statement)."""

from __future__ import annotations

from claimsched import Agent
from claimsched.db import Store
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for

from .support import PRESENCE, due, past, sql, statuses


def _schedule(store: Store, job: str) -> None:
    """A job whose schedule never comes due here (only its orphan may run)."""
    store.schedules.upsert(job_spec(job_name=job, schedule="0 0 1 1 *"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")


def _orphan(store: Store, job: str) -> None:
    _, (result,) = store.claims.claim("gone", due(store, job, past(5)), 4)
    assert result.outcome == "claimed"
    sql(store.dsn, "UPDATE job_runs SET status = 'orphaned', lease_until = now() "
                   "WHERE job_name = %s", [job])


def test_a_reclaim_without_a_list_takes_the_jobs_the_presence_row_lists(store: Store) -> None:
    for job in ("mine", "theirs"):
        _schedule(store, job)
        _orphan(store, job)
    store.claims.housekeeping("a", ["mine", "other"], PRESENCE)
    (taken,) = store.claims.reclaim("a", None, 4)
    assert (taken.job_name, taken.attempt) == ("mine", 2)
    assert store.claims.reclaim("a", None, 4) == []  # "theirs" is not in a's list
    assert store.claims.reclaim("nobody", None, 4) == []  # no presence row: no jobs


def test_an_agent_whose_row_holds_its_list_reclaims_by_that_list(dsn: str, store: Store) -> None:
    """The agent sends no list once housekeeping kept it: what its presence row lists is what
    it reclaims (here the row is edited to leave one job out, which only a reclaim that reads
    the row can notice)."""
    jobs = ("kept", "dropped")
    for job in jobs:
        _schedule(store, job)
    agent = Agent(dsn, agent_id="a", housekeeping_seconds=0.3)
    ran: list[str] = []
    for job in jobs:
        agent.job(job)(lambda run: ran.append(run.job_name))
    agent.start()  # housekeeping has written the row with both jobs
    try:
        sql(dsn, "UPDATE agents SET handlers = '{kept}' WHERE agent_id = 'a'")
        for job in jobs:
            _orphan(store, job)
        wait_for(lambda: "kept" in ran, timeout=10)
        assert statuses(dsn, "dropped") == ["orphaned"]
    finally:
        agent.stop()
