"""The claim statement's plan on a real Postgres: it reads schedules and runs by index, however
small the tables were when the session planned the statement (plans are kept per session,
and an agent's connections live long: a hash of the whole table per claim would grow with
every run ever recorded)."""

from __future__ import annotations

import psycopg

from claimsched.db import Store
from claimsched.db.arrays import claim_params
from claimsched.db.queries import query
from claimsched.specs import job_spec

from .support import due, past, sql


def test_a_claim_planned_on_empty_tables_reads_them_by_index(store: Store) -> None:
    store.upsert_schedule(job_spec(job_name="j", schedule="@every 1s", concurrency_policy="Allow"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 day'")
    sql(store.dsn, "ANALYZE job_runs")
    plans: list[str] = []
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute("SET search_path = claimsched, public")
        conn.execute("LOAD 'auto_explain'")
        for setting, value in {"log_min_duration": "0", "log_nested_statements": "on",
                               "log_level": "notice"}.items():
            conn.execute(f"SET auto_explain.{setting} = {value}")
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for seconds in range(8, 0, -1):  # past plpgsql's first custom plans: its generic one
            params = claim_params("a", due(store, "j", past(seconds)), 4)
            (row,) = conn.execute(query("claim"), params).fetchall()
            assert row[2] == "claimed"
    claims = [plan for plan in plans if "WITH cand AS" in plan]
    assert len(claims) == 8
    assert all("Seq Scan" not in plan for plan in claims), claims[-1]
