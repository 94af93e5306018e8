"""Turns on a real Postgres (turns.py): a peer checks the occurrences handed to it, and claims
only what their first claimer left."""

from __future__ import annotations

from datetime import datetime, timedelta

from claimsched import Agent
from claimsched.db import Store
from claimsched.plan.planner import micros
from claimsched.plan.turns import HANDOFF, Turns
from claimsched.schedule.specs import job_spec
from tests.helpers.polling import wait_for

from .support import PRESENCE, due, past, sql


def test_unclaimed_names_the_occurrences_no_run_row_holds(store: Store) -> None:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    claimed, skipped, free = past(3), past(2), past(1)
    won = store.claims.claim("a", due(store, "job", claimed), 1)
    recorded = store.claims.claim("a", due(store, "job", skipped, want="skipped", reason="r",
                                    latest=False), 0)
    assert won and recorded
    assert [r.outcome for r in won[1] + recorded[1]] == ["claimed", "skipped"]
    candidates = due(store, "job", claimed, skipped, free) + due(store, "other", free)
    assert store.claims.unclaimed(candidates) == {("job", free), ("other", free)}
    assert store.claims.unclaimed([]) == set()


def test_a_peer_runs_what_a_silent_first_claimer_left_a_hand_off_late(
    dsn: str, store: Store
) -> None:
    """A peer that claims nothing (hung, or gone and its presence not yet expired) leaves its
    turns: the other replica checks them after the hand-off, finds them unclaimed and runs
    them then, and runs its own at once; every occurrence exactly once, none skipped."""
    store.claims.housekeeping("ghost", ["j"], {**PRESENCE, "ttl_seconds": 600})  # the same jobs
    agent = Agent(dsn, agent_id="b", housekeeping_seconds=0.3, shutdown_grace_seconds=2)
    agent.job("j", schedule="@every 1s")(lambda run: None)
    turns = Turns("b", ("b", "ghost"))
    agent.start()
    try:
        wait_for(lambda: agent.claimer.planner.turns.peers == turns.peers, what="peers")
        (start,) = sql(dsn, "SELECT date_trunc('second', now()) + interval '2 s'")[0]

        def done() -> list[tuple[datetime, str, datetime, str]]:
            rows = sql(dsn, "SELECT fire_time, status, started_at, claimed_by FROM job_runs "
                            "WHERE job_name = 'j' AND fire_time >= %s ORDER BY 1", [start])
            ghosts = [r for r in rows if not turns.first("j", micros(r[0]))]
            settled = all(r[1] != "running" for r in rows)  # the newest may be just claimed
            return rows if settled and len(ghosts) >= 3 and len(rows) - len(ghosts) >= 3 else []

        rows = wait_for(done, what="three turns of each replica run", timeout=60)
    finally:
        agent.stop()
    times = [fire for fire, *_ in rows]
    assert times == [start + timedelta(seconds=i) for i in range(len(rows))]  # none skipped
    assert {(status, by) for _, status, _, by in rows} == {("done", "b")}
    for fire, _, started, _ in rows:
        if not turns.first("j", micros(fire)):  # the ghost's turn: the hand-off first
            assert started - fire >= HANDOFF * 0.8, (fire, started)
