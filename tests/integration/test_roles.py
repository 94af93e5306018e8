"""The roles of `claimsched roles`: the agent's writes only through fenced functions, the
operator's only to schedules and requested runs. Every forbidden write is refused."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict

from claimsched.cli import main as claimsched
from claimsched.db import OwnedSchedules, Roles, Store
from claimsched.db.queries import migration_files
from claimsched.db.schedules import spec_json
from claimsched.errors import ConfigurationError, DatabaseError
from claimsched.records import Candidate, Completion, Lease
from claimsched.schedule.specs import JobSpec

from .support import HIJACK, PRESENCE, past
from .support import sql as run_sql

_counter = itertools.count()


@dataclass(frozen=True)
class Logins:
    agent: str  # the agent role's DSN
    operator: str  # the operator role's DSN
    nobody: str  # a role `claimsched roles` granted nothing


@pytest.fixture
def logins(dsn: str) -> Iterator[Logins]:
    """The two roles, granted by the owner (roles are server-wide: each test has its own)."""
    suffix = f"{os.getpid()}_{next(_counter)}"
    roles = Roles(agent=f"cs_agent_{suffix}", operator=f"cs_operator_{suffix}")
    nobody = f"cs_nobody_{suffix}"
    owner = Store(dsn)
    owner.admin.grant_roles(roles)
    owner.admin.grant_roles(roles)  # idempotent
    run_sql(dsn, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(nobody)))
    password = secrets.token_hex(12)
    found = {}
    for role in (roles.agent, roles.operator, nobody):
        run_sql(dsn, sql.SQL("ALTER ROLE {} PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))
        found[role] = psycopg.conninfo.make_conninfo(dsn, user=role, password=password)
    yield Logins(found[roles.agent], found[roles.operator], found[nobody])
    for role in (roles.agent, roles.operator, nobody):
        run_sql(dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        run_sql(dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def lease(store: Store) -> Lease:
    """A running run of job `nightly`, claimed (as the owner) by agent `a1`."""
    store.schedules.upsert(JobSpec(job_name="nightly", schedule="@every 1s", source="cli"))
    store.listings.request_runs("nightly", [past(5)], "manual")
    (claimed,) = store.claims.reclaim("a1", ["nightly"], 1)
    return claimed


TABLE_WRITES = [
    "UPDATE job_schedule SET schedule = '@every 1s'",
    "INSERT INTO job_schedule (job_name, schedule) VALUES ('sneaky', '@every 1s')",
    "DELETE FROM job_schedule",
    "UPDATE job_runs SET status = 'running', finished_at = NULL",
    "INSERT INTO job_runs (job_name, fire_time, status) VALUES ('nightly', now(), 'done')",
    "DELETE FROM job_runs",
    "UPDATE job_effects SET attempt = 9",
    "INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt) "
    "VALUES ('forged', 'nightly', now(), 1, 1)",
    "DELETE FROM job_effects",
    "INSERT INTO agents (agent_id, hostname, version) VALUES ('x', 'h', 'v')",
    "UPDATE agents SET stopped_at = now()",
    "DELETE FROM agents",
    "INSERT INTO job_triggers (trigger_key, job_name, fire_time) VALUES ('k', 'nightly', now())",
    "UPDATE schema_version SET version = 999",
    "INSERT INTO schema_version (version) VALUES (999)",
    "DELETE FROM schema_version",
    "UPDATE schedule_epoch SET epoch = 0",
    "CREATE TABLE claimsched.sneaky (id int)",
    "CREATE FUNCTION claimsched.now() RETURNS timestamptz LANGUAGE sql "
    "AS $$ SELECT 'infinity'::timestamptz $$",
]


OPERATOR_WRITES = [s for s in TABLE_WRITES if not s.startswith("UPDATE job_schedule")] + [
    "UPDATE job_schedule SET schedule = '@every 1s'",
    "UPDATE job_schedule SET source = 'code', owner = NULL",
    "SELECT lease_token FROM job_runs",
    "SELECT lease_token FROM job_runs_default",
]


# What proves the ownership of a run (its owner and fencing token), which an agent may not read.
OWNERSHIP_READS = [
    "SELECT claimed_by FROM job_runs",
    "SELECT id, attempt FROM job_runs",
    "SELECT lease_token FROM job_runs",
    "SELECT lease_token FROM job_runs_default",
    "SELECT error FROM job_runs",
    "SELECT agent_id FROM agents",
    "SELECT * FROM job_effects",
]
# The agent API's versions (sql/functions/): API 1's names, API 2's.
APIS = ("", "_v2")
# Functions called by a role that has no grant for them.
UNGRANTED_CALLS = [
    *(call.replace("(", f"{api}(", 1) for api in APIS for call in (
        "SELECT * FROM claimsched.cs_claim('a', 1, NULL, NULL, NULL, NULL, NULL, NULL)",
        "SELECT * FROM claimsched.cs_complete('a', NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL)",
        "SELECT * FROM claimsched.cs_effect(1, now(), 'a', 1, NULL, 'e', 'j')",
        "SELECT * FROM claimsched.cs_declare_schedule('{}')",
    )),
    "SELECT * FROM claimsched.cs_request_runs('nightly', ARRAY[now()], 'manual')",
]
# The agent's functions, called by the operator.
AGENT_CALLS = [
    call.replace("(", f"{api}(", 1) for api in APIS for call in (
        "SELECT * FROM claimsched.cs_complete('a1', NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL)",
        "SELECT * FROM claimsched.cs_effect(1, now(), 'a1', 1, NULL, 'e', 'nightly')",
        "SELECT * FROM claimsched.cs_heartbeat('a1', NULL, NULL, NULL, NULL, NULL)",
        "SELECT * FROM claimsched.cs_housekeeping('a1', 'h', NULL, NULL, NULL, 'v', 9, NULL)",
    )
]
REFUSED = ([("agent", s) for s in TABLE_WRITES + OWNERSHIP_READS]
           + [("operator", s) for s in OPERATOR_WRITES + AGENT_CALLS]
           + [("nobody", s) for s in UNGRANTED_CALLS])


@pytest.mark.parametrize(("who", "statement"), REFUSED)
def test_every_write_a_role_has_no_business_with_is_refused(
        logins: Logins, lease: Lease, who: str, statement: str) -> None:
    with pytest.raises(errors.InsufficientPrivilege):
        run_sql(getattr(logins, who), statement)


@pytest.fixture
def as_agent(logins: Logins) -> Iterator[Store]:
    """A store connected as the agent role."""
    store = Store(logins.agent)
    store.open()
    yield store
    store.close()


def test_a_finished_run_is_not_reopened_by_the_agent_role(
        as_agent: Store, store: Store, lease: Lease, dsn: str) -> None:
    assert store.claims.complete("a1", [Completion(lease, "done")])
    assert as_agent.claims.complete("a1", [Completion(lease, "failed", "again")]) == {}
    row = run_sql(dsn, "SELECT status, error FROM job_runs WHERE id = %s", [lease.id])
    assert row == [("done", None)]
    with pytest.raises(errors.InsufficientPrivilege):
        run_sql(as_agent.dsn, "UPDATE job_runs SET status = 'pending'")


def test_an_agent_role_cannot_complete_into_a_status_other_than_done_or_failed(
        as_agent: Store, lease: Lease, dsn: str) -> None:
    with as_agent.connection() as conn:
        rows = conn.execute(
            "SELECT * FROM cs_complete_v2('a1', ARRAY[%s]::bigint[], ARRAY[%s]::timestamptz[], "
            "ARRAY[%s], ARRAY[%s]::uuid[], ARRAY['pending'], ARRAY[NULL], ARRAY[false], "
            "ARRAY[3], ARRAY[0.0])",
            [lease.id, lease.fire_time, lease.attempt, lease.lease_token]).fetchall()
    assert rows == []
    assert run_sql(dsn, "SELECT status FROM job_runs WHERE id = %s", [lease.id]) == [("running",)]


def test_a_receipt_needs_the_callers_own_live_lease(
        as_agent: Store, lease: Lease, dsn: str) -> None:
    wrong_agent = as_agent.receipts.record("a2", lease, "invoice:1")
    wrong_token = as_agent.receipts.record("a1", dataclasses.replace(lease, attempt=2), "invoice:1")
    other_job = as_agent.receipts.record("a1", dataclasses.replace(lease, job_name="payroll"),
                                         "invoice:1")
    assert (wrong_agent, wrong_token, other_job) == ((False, False),) * 3
    assert run_sql(dsn, "SELECT count(*) FROM job_effects") == [(0,)]
    assert as_agent.receipts.record("a1", lease, "invoice:1") == (True, True)
    assert run_sql(dsn, "SELECT entity, run_id FROM job_effects") == [("invoice:1", lease.id)]


def test_an_agent_role_cannot_renew_or_release_anothers_run(
        as_agent: Store, lease: Lease, dsn: str) -> None:
    before = run_sql(dsn, "SELECT lease_until FROM job_runs WHERE id = %s", [lease.id])
    assert as_agent.claims.heartbeat("a2", [lease]) == set()
    assert as_agent.claims.release("a2", [lease]) == 0
    assert run_sql(dsn, "SELECT lease_until FROM job_runs WHERE id = %s", [lease.id]) == before
    assert as_agent.claims.heartbeat("a1", [lease]) == {lease.id}


def test_an_agent_role_never_takes_over_a_schedule_the_operator_or_the_cli_owns(
        as_agent: Store, store: Store, dsn: str) -> None:
    store.schedules.upsert(
        JobSpec(job_name="billing", schedule="@daily", source="operator", owner="team-a/billing"))
    store.schedules.upsert(JobSpec(job_name="report", schedule="@daily", source="cli"))
    for job in ("billing", "report"):
        declared = as_agent.schedules.upsert(JobSpec(job_name=job, schedule="@every 1s"))
        assert declared.outcome == "unchanged" and declared.held_by
    # Claiming to be the ClaimSchedule or the CLI: the agent declares as code all the same,
    # and may not call the operator's function.
    impostor = spec_json(JobSpec(job_name="billing", schedule="@every 1s", source="operator",
                                 owner="team-a/billing"))
    with psycopg.connect(as_agent.dsn, autocommit=True) as conn:
        for declare in ("SELECT * FROM claimsched.cs_declare_schedule(%s)",
                        "SELECT * FROM claimsched.cs_declare_schedule_v2(%s)"):
            row = conn.execute(declare, [impostor]).fetchone()
            assert row == ("operator", "team-a/billing", False, False)
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM claimsched.cs_upsert_schedule(%s)", [impostor])
    with pytest.raises(DatabaseError, match="permission denied"):
        as_agent.schedules.upsert(JobSpec(job_name="report", schedule="@every 1s", source="cli"))
    assert run_sql(dsn, "SELECT job_name, schedule, source FROM job_schedule ORDER BY 1") == [
        ("billing", "@daily", "operator"), ("report", "@daily", "cli")]


def test_an_agent_role_declares_claims_and_completes_through_the_functions(
        as_agent: Store, dsn: str) -> None:
    assert as_agent.schedules.upsert(JobSpec(job_name="sweep", schedule="@every 1s")).outcome \
        == "created"
    run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    schedule = as_agent.schedules.load()[0]
    outcome = as_agent.claims.claim("a1", [Candidate("sweep", past(1), schedule.active_since)], 1)
    assert outcome is not None and outcome[1][0].outcome == "claimed"
    claimed = outcome[1][0].lease
    assert claimed is not None
    assert as_agent.receipts.record("a1", claimed, "e") == (True, True)
    assert as_agent.claims.complete("a1", [Completion(claimed, "done")]) == {claimed.id: None}
    found = as_agent.claims.housekeeping("a1", ["sweep"], PRESENCE)
    assert not found.claimable
    as_agent.claims.agent_stopped("a1")
    assert run_sql(dsn, "SELECT status, claimed_by FROM job_runs") == [("done", "a1")]
    assert run_sql(dsn, "SELECT stopped_at IS NOT NULL FROM agents") == [(True,)]


def test_the_agent_role_reads_the_schedules_epoch_its_poll_compares(
        logins: Logins, dsn: str) -> None:
    epoch = "SELECT epoch FROM claimsched.schedule_epoch"
    assert run_sql(logins.agent, epoch) == run_sql(dsn, epoch)


def test_migrating_to_the_schedules_epoch_lets_the_roles_that_read_schedules_read_it(
        logins: Logins, dsn: str) -> None:
    """An upgrade to migration 0015 after `claimsched roles`: polling agents go on working
    before the roles are granted again. (Migration 0015 alone is applied again, as migrate
    applied it: the later ones cannot be undone here.)"""
    run_sql(dsn, "DROP TABLE schedule_epoch")
    run_sql(dsn, "DROP TRIGGER job_schedule_epoch ON job_schedule")
    run_sql(dsn, "DROP FUNCTION count_schedule_change()")
    (epoch_migration,) = [text for version, _, text in migration_files() if version == 15]
    run_sql(dsn, epoch_migration)
    epoch = "SELECT epoch FROM claimsched.schedule_epoch"
    assert run_sql(logins.agent, epoch) == run_sql(logins.operator, epoch) == [(0,)]
    with pytest.raises(errors.InsufficientPrivilege):
        run_sql(logins.nobody, epoch)


def test_a_callers_temporary_table_does_not_stand_in_for_claimschedules(
        logins: Logins, lease: Lease, dsn: str) -> None:
    with psycopg.connect(logins.agent, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE job_runs (id bigint, fire_time timestamptz, "
                     "attempt integer, claimed_by text, status text, lease_until timestamptz)")
        conn.execute("SET search_path = pg_temp, claimsched, public")
        renewed = conn.execute(
            "SELECT * FROM claimsched.cs_heartbeat_v2('a1', ARRAY[%s]::bigint[], "
            "ARRAY[%s]::timestamptz[], ARRAY[%s], ARRAY[%s]::uuid[], ARRAY[60.0])",
            [lease.id, lease.fire_time, lease.attempt, lease.lease_token]).fetchall()
    assert renewed == [(lease.id,)]




def test_a_function_put_in_claimscheds_schema_does_not_stand_in_for_a_built_in_one(
        logins: Logins, as_agent: Store, store: Store, dsn: str) -> None:
    """Had a scoped agent role been let CREATE in the schema (migrate and roles refuse such a
    schema, but a grant may come later), its gen_random_uuid() and now() would run inside the
    functions as their owner: the built-in ones are found first."""
    agent_role = run_sql(logins.agent, "SELECT current_user")[0][0]
    run_sql(dsn, sql.SQL("INSERT INTO agent_scopes VALUES ({}, 'nightly')").format(
        sql.Literal(agent_role)))
    run_sql(dsn, sql.SQL("GRANT CREATE ON SCHEMA claimsched TO {}").format(
        sql.Identifier(agent_role)))
    with psycopg.connect(logins.agent, autocommit=True) as conn:
        conn.execute(HIJACK)
    store.schedules.upsert(JobSpec(job_name="nightly", schedule="@every 1s", source="cli"))
    store.listings.request_runs("nightly", [past(5)], "manual")
    (taken,) = as_agent.claims.reclaim("a1", ["nightly"], 1)
    assert str(taken.lease_token) != "00000000-0000-0000-0000-000000000001"
    assert taken.lease_until.year < 9999
    assert run_sql(dsn, "SELECT count(*) FROM agent_scopes") == [(1,)]


def test_the_operator_role_does_what_the_operator_and_the_cli_do(
        logins: Logins, dsn: str) -> None:
    operator = Store(logins.operator)
    operator.open()
    try:
        owned = OwnedSchedules(operator)
        spec = JobSpec(job_name="billing", schedule="@daily", source="operator",
                       owner="team-a/billing")
        assert owned.sync(spec).outcome == "created"
        assert owned.trigger("billing", "key-1") is not None
        assert operator.listings.request_runs("billing", [past(3600)], "backfill")
        assert owned.status_rows(
            {"jobs": ["billing"], "known_from": [None], "known_to": [None],
             "known_epoch": None}, 90)[0]["job_name"] == "billing"
        assert owned.database()[1] == conninfo_to_dict(dsn)["dbname"]  # which database it is
        assert owned.release("team-a/billing") == "billing"
        cli = JobSpec(job_name="billing", schedule="@hourly", source="cli")
        assert operator.schedules.upsert(cli).outcome == "updated"
        assert operator.schedules.suspend("billing", None, "audit").enabled is False
        assert operator.schedules.resume("billing").enabled is True
        assert operator.listings.runs("billing") and operator.listings.agents() == []
    finally:
        operator.close()
    kinds = run_sql(dsn, "SELECT kind, status FROM job_runs ORDER BY kind")
    assert kinds == [("backfill", "pending"), ("manual", "pending")]
    assert run_sql(dsn, "SELECT source, schedule FROM job_schedule") == [("cli", "@hourly")]


def test_the_agent_role_may_not_request_runs_or_suspend(
        as_agent: Store, lease: Lease) -> None:
    with pytest.raises(DatabaseError, match="permission denied"):
        as_agent.listings.request_runs("nightly", [past(10) - timedelta(days=1)], "manual")
    with pytest.raises(DatabaseError, match="permission denied"):
        as_agent.schedules.suspend("nightly", None, None)


# -- lease tokens: what another agent sharing the role cannot know ---------------------------


def _forged(lease: Lease) -> Lease:
    """Everything another agent can learn of a run (its id, fire time, attempt, and its owner's
    agent id from logs or a status), with a lease token of its own making."""
    return dataclasses.replace(lease, lease_token=uuid.uuid4())


def _run_row(dsn: str, lease: Lease) -> list[tuple[Any, ...]]:
    return run_sql(dsn, "SELECT status, lease_until, attempt FROM job_runs WHERE id = %s",
                    [lease.id])


def test_without_its_lease_token_another_runs_lease_is_neither_renewed_completed_nor_released(
        as_agent: Store, lease: Lease, dsn: str) -> None:
    forged = _forged(lease)
    before = _run_row(dsn, lease)
    assert as_agent.claims.heartbeat("a1", [forged]) == set()
    assert as_agent.claims.release("a1", [forged]) == 0
    assert as_agent.claims.complete("a1", [Completion(forged, "failed", "forged")]) == {}
    assert _run_row(dsn, lease) == before
    assert as_agent.claims.heartbeat("a1", [lease]) == {lease.id}
    assert as_agent.claims.complete("a1", [Completion(lease, "done")]) == {lease.id: None}


def test_without_its_lease_token_no_receipt_is_written_for_another_run_in_any_form(
        as_agent: Store, lease: Lease, dsn: str) -> None:
    forged = _forged(lease)
    assert as_agent.receipts.record("a1", forged, "invoice:1") == (False, False)
    with as_agent.receipts.hold("a1", forged, "invoice:2") as held:
        assert held == (False, False)
    with psycopg.connect(as_agent.dsn) as app, app.transaction():  # the app's own transaction
        assert as_agent.receipts.record("a1", forged, "invoice:3", app) == (False, False)
    assert run_sql(dsn, "SELECT count(*) FROM job_effects") == [(0,)]
    assert as_agent.receipts.record("a1", lease, "invoice:1") == (True, True)


def test_a_reclaim_draws_a_new_lease_token_that_fences_out_the_previous_owner(
        as_agent: Store, store: Store, lease: Lease, dsn: str) -> None:
    run_sql(dsn, "UPDATE job_runs SET lease_until = now() - interval '1 second'")
    assert as_agent.claims.housekeeping("a2", ["nightly"], PRESENCE).orphaned == 1
    # The same agent id takes it over: only the lease token tells the two attempts apart.
    (taken,) = as_agent.claims.reclaim("a1", ["nightly"], 1)
    assert taken.lease_token != lease.lease_token
    stale = dataclasses.replace(taken, lease_token=lease.lease_token)
    assert as_agent.receipts.record("a1", stale, "invoice:1") == (False, False)
    assert as_agent.claims.complete("a1", [Completion(stale, "failed", "stale")]) == {}
    assert run_sql(dsn, "SELECT status FROM job_runs") == [("running",)]
    assert as_agent.receipts.record("a1", taken, "invoice:1") == (True, True)
    assert as_agent.claims.complete("a1", [Completion(taken, "done")]) == {taken.id: None}


def test_migrate_keeps_the_agent_role_able_to_call_functions_whose_signature_changed(
        logins: Logins, as_agent: Store, store: Store, dsn: str) -> None:
    """An upgrade: the roles were granted for an older cs_heartbeat (no lease token argument)
    and cs_reclaim (none among its result columns), then `migrate` replaces them. The agent role
    may call the new ones without `claimsched roles`."""
    agent_role = sql.Identifier(run_sql(logins.agent, "SELECT current_user")[0][0])
    older = {"cs_heartbeat(text, bigint[], timestamptz[], integer[], double precision[])":
             "cs_heartbeat(text, bigint[], timestamptz[], integer[], uuid[], double precision[])",
             "cs_reclaim(text, text[], integer)": "cs_reclaim(text, text[], integer)"}
    for old, new in older.items():
        run_sql(dsn, f"DROP FUNCTION {new}")
        run_sql(dsn, f"CREATE FUNCTION {old} RETURNS TABLE (id bigint) LANGUAGE sql"
                      " AS 'SELECT 1::bigint WHERE false'")
        run_sql(dsn, sql.SQL(f"GRANT EXECUTE ON FUNCTION {old} TO {{}}").format(agent_role))
    store.admin.migrate()
    store.admin.migrate()  # and again: nothing is lost on the way
    store.schedules.upsert(JobSpec(job_name="nightly", schedule="@every 1s", source="cli"))
    store.listings.request_runs("nightly", [past(5)], "manual")
    (taken,) = as_agent.claims.reclaim("a1", ["nightly"], 1)
    assert as_agent.claims.heartbeat("a1", [taken]) == {taken.id}
    assert as_agent.claims.complete("a1", [Completion(taken, "done")]) == {taken.id: None}
    # The roles it did not have before, it still has not, in either version.
    for heartbeat in ("cs_heartbeat", "cs_heartbeat_v2"):
        with pytest.raises(errors.InsufficientPrivilege):
            run_sql(logins.operator, sql.SQL("SELECT * FROM claimsched.{}('a1', NULL, NULL, NULL,"
                                             " NULL, NULL)").format(sql.Identifier(heartbeat)))


# -- scopes: the jobs an agent role may act for (`claimsched roles --jobs`) -------------------


def test_a_scoped_agent_role_neither_claims_reclaims_nor_declares_another_job(
        logins: Logins, as_agent: Store, store: Store, dsn: str) -> None:
    agent_role, operator_role = (run_sql(login, "SELECT current_user")[0][0]
                                 for login in (logins.agent, logins.operator))
    scoped = ["roles", "--agent-role", agent_role, "--operator-role", operator_role,
              "--jobs-like", "team-a-%", "--jobs", "billing", "--dsn", dsn]
    assert claimsched(scoped) == 0
    assert claimsched(scoped) == 0  # idempotent
    assert run_sql(dsn, "SELECT job_pattern FROM agent_scopes WHERE role = %s ORDER BY 1",
                    [agent_role]) == [("billing",), ("team-a-%",)]
    for job in ("payroll", "team-a-sweep"):
        store.schedules.upsert(JobSpec(job_name=job, schedule="@every 1s", source="cli"))
        store.listings.request_runs(job, [past(5)], "manual")
    run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    since = {s.job_name: s.active_since for s in store.schedules.load()}
    due = past(1)

    assert as_agent.claims.reclaim("a1", ["payroll"], 5) == []
    (taken,) = as_agent.claims.reclaim("a1", ["payroll", "team-a-sweep"], 5)
    assert taken.job_name == "team-a-sweep"
    assert as_agent.claims.complete("a1", [Completion(taken, "done")]) == {taken.id: None}
    claimed = as_agent.claims.claim("a1", [Candidate(job, due, since[job])
                                    for job in ("payroll", "team-a-sweep")], 2)
    assert claimed is not None
    assert [(c.job_name, c.outcome) for c in claimed[1]] == [
        ("payroll", "inactive"), ("team-a-sweep", "claimed")]
    refused = as_agent.schedules.upsert(JobSpec(job_name="payroll", schedule="@daily"))
    assert refused.outcome == "unchanged" and refused.held_by
    assert as_agent.schedules.upsert(JobSpec(job_name="other", schedule="@daily")).outcome \
        == "unchanged"
    assert as_agent.schedules.upsert(JobSpec(job_name="billing", schedule="@daily")).outcome \
        == "created"
    assert run_sql(dsn, "SELECT job_name, schedule FROM job_schedule ORDER BY 1") == [
        ("billing", "@daily"), ("payroll", "@every 1s"), ("team-a-sweep", "@every 1s")]
    assert run_sql(dsn, "SELECT status, claimed_by FROM job_runs WHERE job_name = 'payroll'") \
        == [("pending", None)]

    # The schema's owner is never scoped; `--all-jobs` unscopes the role again.
    by_owner = store.claims.claim("o1", [Candidate("payroll", due, since["payroll"])], 1)
    assert by_owner is not None
    (owned,) = by_owner[1]
    assert owned.outcome == "claimed" and owned.lease is not None
    assert store.claims.complete("o1", [Completion(owned.lease, "done")]) == {owned.lease.id: None}
    assert claimsched([*scoped[:5], "--all-jobs", "--dsn", dsn]) == 0
    assert run_sql(dsn, "SELECT count(*) FROM agent_scopes") == [(0,)]
    assert [t.job_name for t in as_agent.claims.reclaim("a1", ["payroll"], 5)] == ["payroll"]


def test_a_job_pattern_may_not_be_empty() -> None:
    with pytest.raises(ConfigurationError, match="may not be empty"):
        Roles(agent="a", operator="o", jobs=("billing", " "))
    with pytest.raises(ConfigurationError, match="may not be empty"):
        Roles(agent="a", operator="o", jobs_like=("",))


def test_a_scope_by_name_is_that_job_alone_and_roles_says_which_jobs_it_matches(
        logins: Logins, as_agent: Store, store: Store, dsn: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--jobs daily_report` is one job: another team's `daily-report` (or `dailyXreport`) is
    not in it, though '_' matches any one character in a LIKE pattern."""
    agent_role, operator_role = (run_sql(login, "SELECT current_user")[0][0]
                                 for login in (logins.agent, logins.operator))
    for job in ("daily_report", "daily-report", "team-a-x"):
        store.schedules.upsert(JobSpec(job_name=job, schedule="@every 1s", source="cli"))
        store.listings.request_runs(job, [past(5)], "manual")
    capsys.readouterr()
    assert claimsched(["roles", "--agent-role", agent_role, "--operator-role", operator_role,
                       "--jobs", "daily_report", "--jobs-like", "team-a-%", "--dsn", dsn,
                       "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["agent_jobs"] == ["daily_report", "team-a-x"]
    assert said["agent_scope"] == ["daily\\_report", "team-a-%"]
    taken = as_agent.claims.reclaim("a1", ["daily-report", "daily_report", "team-a-x"], 5)
    assert sorted(t.job_name for t in taken) == ["daily_report", "team-a-x"]
    assert claimsched(["roles", "--agent-role", agent_role, "--operator-role", operator_role,
                       "--dsn", dsn]) == 0
    assert "acts for the jobs of its scope: today daily_report, team-a-x" in \
        capsys.readouterr().out


def test_the_agent_role_polls_behind_a_pooler_for_its_own_row_only(
        logins: Logins, as_agent: Store, store: Store, dsn: str) -> None:
    """Poll mode (no LISTEN through pgbouncer) as the least-privilege role: it may read neither
    the agents table nor another login's row, and still learns that its runs want an owner."""
    store.schedules.upsert(JobSpec(job_name="nightly", schedule="@yearly", source="cli"))
    as_agent.claims.housekeeping("a1", ["nightly"], PRESENCE)
    store.claims.housekeeping("o1", ["nightly"], PRESENCE)  # the owner's own agent, another login
    epoch, claimable = as_agent.claims.poll("a1")
    assert epoch and claimable is False
    store.listings.request_runs("nightly", [past(5)], "manual")
    assert as_agent.claims.poll("a1") == (epoch, True)
    assert as_agent.claims.poll("o1") == (epoch, False)  # not its row: nothing to say
