"""The claim statement's plan on a real Postgres: it reads schedules and runs by index, however
small the tables were when the session planned the statement (plans are kept per session,
and an agent's connections live long: a hash of the whole table per claim would grow with
every run ever recorded)."""

from __future__ import annotations

from claimsched.db import Store
from claimsched.db.arrays import claim_params
from claimsched.db.queries import query
from claimsched.specs import job_spec

from .support import due, explained, past, sql


def test_a_claim_planned_on_empty_tables_reads_them_by_index(store: Store) -> None:
    store.upsert_schedule(job_spec(job_name="j", schedule="@every 1s", concurrency_policy="Allow"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 day'")
    sql(store.dsn, "ANALYZE job_runs")
    with explained(store.dsn) as (conn, plans):
        for seconds in range(8, 0, -1):  # past plpgsql's first custom plans: its generic one
            params = claim_params("a", due(store, "j", past(seconds)), 4)
            (row,) = conn.execute(query("claim"), params).fetchall()
            assert row[2] == "claimed"
    claims = [plan for plan in plans if "WITH cand AS" in plan]
    assert len(claims) == 8
    assert all("Seq Scan" not in plan for plan in claims), claims[-1]
