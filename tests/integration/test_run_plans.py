"""The plans of the statements agents run for every run and every period, on a real Postgres:
planned while the tables were nearly empty (a new database: plans are kept per session, and an
agent's connections live long), they still read runs and schedules by key or through the
partial indexes of live runs (running, claimable), never a scan of every run or schedule, a
cost that would grow with every run recorded."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from claimsched.db import Store
from claimsched.db.arrays import claim_params
from claimsched.db.claims import read_unclaimed
from claimsched.db.queries import call
from claimsched.records import Candidate
from claimsched.schedule.specs import job_spec

from .support import PRESENCE, due, explained, past, sql

# A scan node of a plan: its kind, the index it uses (if any), what it reads.
_SCAN = re.compile(r"(Seq Scan|Index Only Scan|Index Scan|Bitmap Index Scan)(?: Backward)?"
                   r"(?: using (\S+))? on (\S+)")

#: Each statement (a named query, or SQL), with its parameters given the run `r` it acts on.
#: Not heartbeat and complete: their plan is the statistics' (sql/functions/ says why).
STATEMENTS: dict[str, tuple[str, Any]] = {
    "claim": (call("cs_claim_v2"), lambda r: claim_params(  # taken: the whole statement runs
        "a", [Candidate("j", r["fire_time"], r["since"])], 4)),
    "reclaim": (call("cs_reclaim_v2"),
                lambda r: {"agent_id": "a", "jobs": ["j", "f"], "capacity": 4}),
    "reclaim_listed": (call("cs_reclaim_v2"),
                       lambda r: {"agent_id": "a", "jobs": None, "capacity": 4}),
    "release": (call("cs_release_v2"), lambda r: {
        "agent_id": "a", "ids": [r["id"]], "lease_tokens": [uuid.uuid4()]}),
    "effect": (call("cs_effect_v2"), lambda r: {
        "run_id": r["id"], "fire_time": r["fire_time"], "agent_id": "a",
        "attempt": r["attempt"], "lease_token": r["lease_token"], "entity": "e",
        "job_name": "j"}),
    "housekeeping": (call("cs_housekeeping_v2"), lambda r: {
        "agent_id": "a", "handlers": ["j", "f"], **PRESENCE}),
    "forbid_locked": ("SELECT * FROM cs_forbid_locked(ARRAY['f'])", lambda r: None),
}


def _full_scans(plan: str, grows: set[str], live: set[str]) -> list[str]:
    """The scans in `plan` that read all of a table in `grows`: a Seq Scan, or an index scan
    without an Index Cond, except through an index of live runs only (`live`)."""
    lines = plan.splitlines()
    found = []
    for at, line in enumerate(lines):
        scan = _SCAN.search(line)
        if not scan or "Query Text" in line:
            continue
        kind, index, table = scan.groups()
        if kind == "Bitmap Index Scan":
            continue  # its Bitmap Heap Scan's line names the table; its own, the index
        details = []
        for detail in lines[at + 1:]:
            if "->" in detail or not detail.strip():
                break
            details.append(detail.strip())
        keyed = any(d.startswith("Index Cond:") for d in details)
        if table in grows and (kind == "Seq Scan" or not (keyed or index in live)):
            found.append(line.strip())
    return found


@pytest.mark.parametrize("name", STATEMENTS)
def test_a_statement_planned_on_small_tables_reads_by_key(store: Store, name: str) -> None:
    store.schedules.upsert(job_spec(job_name="j", schedule="@every 1s", concurrency_policy="Allow"))
    store.schedules.upsert(
        job_spec(job_name="f", schedule="@every 1s", concurrency_policy="Forbid"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 day'")
    for job in ("j", "f"):
        sql(store.dsn, call("cs_claim_v2"), claim_params("a", due(store, job, past(3), past(2)), 4))
    sql(store.dsn, "UPDATE job_runs SET status = 'orphaned' WHERE job_name = 'j' AND fire_time ="
                   " (SELECT min(fire_time) FROM job_runs WHERE job_name = 'j')")
    sql(store.dsn, "INSERT INTO agents (agent_id, hostname, version, handlers)"
                   " VALUES ('a', 'h', 't', '{j,f}')")
    sql(store.dsn, "ANALYZE")
    # The tables that grow: the schedules, the receipts, and the runs' partition (this month's).
    grows = {"job_schedule", "job_effects",
             *(row[0] for row in sql(store.dsn, "SELECT DISTINCT tableoid::regclass::text"
                                                " FROM job_runs"))}
    live = {row[0] for index in ("job_runs_running", "job_runs_claimable") for row in sql(
        store.dsn, "SELECT relid::regclass::text FROM pg_partition_tree(%s)", [index])}
    (run,) = [dict(zip(("id", "fire_time", "attempt", "lease_token", "since"), row, strict=True))
              for row in sql(store.dsn, "SELECT r.id, r.fire_time, r.attempt, r.lease_token,"
                                        " s.active_since FROM job_runs r JOIN job_schedule s"
                                        " USING (job_name) WHERE job_name = 'j'"
                                        " AND status = 'running'")]
    statement, params = STATEMENTS[name]
    with explained(store.dsn) as (conn, plans):
        for _ in range(7):  # past plpgsql's first custom plans (planned for each call)
            conn.execute(statement, params(run)).fetchall()
        plans.clear()
        conn.execute(statement, params(run)).fetchall()  # with the plans it keeps
    assert len(plans) > 1
    assert [scan for plan in plans for scan in _full_scans(plan, grows, live)] == []


def test_the_check_of_handed_off_occurrences_is_planned_for_the_runs_as_they_are_now(
    store: Store,
) -> None:
    """A plain read (not a function: it can't turn seq scans off), so it is never kept: planned
    while the runs' partition was small it scanned it, and a kept plan would go on scanning it
    for every key as it grew."""
    store.schedules.upsert(job_spec(job_name="j", schedule="@every 1s"))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 day'")
    taken, free = past(2), past(1)
    sql(store.dsn, call("cs_claim_v2"), claim_params("a", due(store, "j", taken), 4))
    sql(store.dsn, "ANALYZE")
    keys = [Candidate("j", taken, taken), Candidate("j", free, taken)]
    with explained(store.dsn) as (conn, plans):
        for _ in range(12):  # past a prepared statement's first custom plans
            assert read_unclaimed(conn, keys) == {("j", keys[1].fire_time)}
        assert any("Seq Scan" in plan for plan in plans)  # small: reading it all is cheapest
        sql(store.dsn, "INSERT INTO job_runs (job_name, fire_time, kind, status, claimed_by)"
                       " SELECT 'j', now() - i * interval '1 ms', 'scheduled', 'skipped', 'a'"
                       " FROM generate_series(4000, 40000) AS i")
        plans.clear()
        read_unclaimed(conn, keys)
    grows = {row[0] for row in sql(store.dsn, "SELECT DISTINCT tableoid::regclass::text"
                                              " FROM job_runs")}
    assert [scan for plan in plans for scan in _full_scans(plan, grows, set())] == []
