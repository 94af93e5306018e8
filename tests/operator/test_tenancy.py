"""Two teams, one database, the real operator: team A and team B each have a namespace, a
ClaimSchedule, a login role of `claimsched roles` scoped to its team's jobs and an agent running
as that role. Every
cross-team write, takeover and leak team B tries is refused or absent, and team A's run
completes exactly once all the while."""

from __future__ import annotations

import base64
import itertools
import json
import os
import secrets
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import kubernetes
import psycopg
import pytest
from psycopg import errors, sql
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for
from tests.integration.support import HIJACK
from tests.integration.support import sql as run_sql

from claimsched import Agent, Run
from claimsched.cli import main as claimsched
from claimsched.db import Store
from claimsched.db.schedules import spec_json
from claimsched.records import Candidate, Completion, Lease
from claimsched.schedule.specs import JobSpec
from conftest import GROUP, PLURAL, VERSION, Operator, claimschedule, events

TEAM_A, TEAM_B = "team-a", "team-b"
JOBS = {TEAM_A: "billing", TEAM_B: "reports"}  # each team's job, its agent role's scope
PASSWORD = "Team-B-Secret-Pw-7"  # in team B's malformed databaseRef DSN
_counter = itertools.count()


@dataclass(frozen=True)
class Team:
    namespace: str
    role: str
    dsn: str  # the team's role's DSN


@pytest.fixture
def teams(dsn: str) -> Iterator[tuple[Team, Team]]:
    """Each team's agent role, made by `claimsched roles` (roles are server-wide: this test's
    own names) and scoped to its team's job, with a password."""
    suffix = f"{os.getpid()}_{next(_counter)}"
    operator_role = f"tenancy_operator_{suffix}"
    made = []
    for namespace in (TEAM_A, TEAM_B):
        role = f"{namespace.replace('-', '_')}_agent_{suffix}"
        assert claimsched(["roles", "--agent-role", role, "--operator-role", operator_role,
                           "--jobs", JOBS[namespace], "--dsn", dsn]) == 0
        password = secrets.token_hex(12)
        run_sql(dsn, sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                                 sql.Literal(password)))
        made.append(Team(namespace, role,
                         psycopg.conninfo.make_conninfo(dsn, user=role, password=password)))
    yield made[0], made[1]
    for role in (made[0].role, made[1].role, operator_role):
        run_sql(dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        run_sql(dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def schedule_row(dsn: str, job: str) -> list[tuple[Any, ...]]:
    return run_sql(dsn, "SELECT schedule, enabled, source, owner FROM job_schedule"
                        " WHERE job_name = %s", [job])


def run_rows(dsn: str, job: str) -> list[tuple[Any, ...]]:
    """What proves a run's state and ownership (its lease's renewals aside), read as the owner."""
    return run_sql(dsn, "SELECT id, status, attempt, claimed_by, lease_token, finished_at, error"
                        " FROM job_runs WHERE job_name = %s ORDER BY id", [job])


def ready(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str
          ) -> dict[str, Any] | None:
    obj = cast(dict[str, Any],
               api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
    return dict(found[0]) if found and found[0]["status"] == "False" else None


def secret(name: str, dsn: str) -> kubernetes.client.V1Secret:
    return kubernetes.client.V1Secret(
        metadata=kubernetes.client.V1ObjectMeta(name=name), type="Opaque",
        data={"dsn": base64.b64encode(dsn.encode()).decode()})


def test_two_teams_share_one_database_and_neither_can_touch_the_others_job(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        core: kubernetes.client.CoreV1Api, operator: Operator, dsn: str, store: Store,
        teams: tuple[Team, Team]) -> None:
    team_a, team_b = teams
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    operator.start()
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL,
                                        claimschedule("billing", "@every 1h"))
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL,
                                        claimschedule("reports", "@every 1s"))
    owned = ("@every 1h", True, "operator", "team-a/billing")
    wait_for(lambda: schedule_row(dsn, "billing") == [owned], "team A's row", log=operator.log)
    wait_for(lambda: schedule_row(dsn, "reports") == [
        ("@every 1s", True, "operator", "team-b/reports")], "team B's row", log=operator.log)

    # Each team's agent, as its own role, without migrating, handles its own job.
    go_on = threading.Event()

    def billing(run: Run) -> None:
        assert go_on.wait(30), "the test never let team A's run finish"
        assert run.effect("invoice:1")

    def reports(run: Run) -> None:
        run.effect(f"report:{run.fire_time.isoformat()}")

    agents = []
    for team, job, handler in ((team_a, "billing", billing), (team_b, "reports", reports)):
        agent = Agent(team.dsn, agent_id=f"{team.namespace}-0", migrate=False,
                      housekeeping_seconds=0.3, shutdown_grace_seconds=2)
        agent.job(job)(handler)
        agents.append(agent)
    try:
        for agent in agents:
            agent.start()
        store.listings.request_runs("billing", [datetime.now(UTC) - timedelta(seconds=1)], "manual")
        running = wait_for(lambda: [r for r in run_rows(dsn, "billing") if r[1] == "running"],
                           "team A's run running", log=operator.log)
        assert len(running) == 1 and running[0][3] == "team-a-0"
        before = run_rows(dsn, "billing")

        # 1. Team B's ClaimSchedule for team A's job: refused, visibly; the row stays A's.
        api.create_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL,
                                            claimschedule("steal", "@every 1s", jobName="billing"))
        refused = wait_for(lambda: ready(api, TEAM_B, "steal"), "Ready=False on team B's steal",
                           log=operator.log)
        assert refused["reason"] == "Conflict"
        assert "ClaimSchedule team-a/billing" in refused["message"]
        conflict = wait_for(lambda: events(served, "Conflict", "steal"), "a Conflict Event")
        assert conflict[0]["type"] == "Warning"
        assert "job 'billing' belongs to ClaimSchedule team-a/billing" in conflict[0]["message"]
        assert schedule_row(dsn, "billing") == [owned]

        # 2. Team B's role, knowing all but the lease token of team A's run.
        run_id, _, attempt, owner_agent, _, _, _ = running[0]
        (fire_time, started_at, lease_until, kind) = run_sql(
            dsn, "SELECT fire_time, started_at, lease_until, kind FROM job_runs WHERE id = %s",
            [run_id])[0]
        forged = Lease(id=run_id, job_name="billing", fire_time=fire_time, attempt=attempt,
                       lease_until=lease_until, started_at=started_at, lease_seconds=60,
                       heartbeat_seconds=10, max_attempts=1, retry_on_failure=False,
                       lease_token=uuid.uuid4(), kind=kind)

        def untouched() -> None:
            assert schedule_row(dsn, "billing") == [owned]
            assert run_rows(dsn, "billing") == before
            assert run_sql(dsn, "SELECT count(*) FROM job_effects WHERE job_name = 'billing'") \
                == [(0,)]

        for statement, params in (
            ("UPDATE job_schedule SET schedule = '@every 1s' WHERE job_name = 'billing'", []),
            ("UPDATE job_schedule SET owner = 'team-b/steal' WHERE job_name = 'billing'", []),
            ("DELETE FROM job_schedule WHERE job_name = 'billing'", []),
            ("UPDATE job_runs SET status = 'failed' WHERE id = %s", [run_id]),
            ("DELETE FROM job_runs WHERE id = %s", [run_id]),
            ("INSERT INTO job_effects (entity, job_name, fire_time, run_id, attempt) "
             "VALUES ('invoice:1', 'billing', now(), %s, %s)", [run_id, attempt]),
            ("SELECT lease_token FROM job_runs WHERE id = %s", [run_id]),
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                run_sql(team_b.dsn, statement, params)
            untouched()

        as_b = Store(team_b.dsn)
        as_b.open()
        try:
            assert as_b.claims.heartbeat(owner_agent, [forged]) == set()
            untouched()
            assert as_b.claims.complete(owner_agent, [Completion(forged, "failed", "forged")]) == {}
            untouched()
            assert as_b.claims.release(owner_agent, [forged]) == 0
            untouched()
            assert as_b.receipts.record(owner_agent, forged, "invoice:1") == (False, False)
            untouched()
            # The functions themselves, with no lease token at all.
            args = [owner_agent, run_id, fire_time, attempt]
            assert run_sql(team_b.dsn, "SELECT * FROM cs_heartbeat_v2(%s, ARRAY[%s]::bigint[],"
                           " ARRAY[%s]::timestamptz[], ARRAY[%s], ARRAY[NULL]::uuid[],"
                           " ARRAY[60.0])", args) == []
            assert run_sql(team_b.dsn, "SELECT * FROM cs_complete_v2(%s, ARRAY[%s]::bigint[],"
                           " ARRAY[%s]::timestamptz[], ARRAY[%s], ARRAY[NULL]::uuid[],"
                           " ARRAY['done'], ARRAY[NULL], ARRAY[false], ARRAY[1], ARRAY[0.0])",
                           args) == []
            untouched()
            # A declaration of team A's job, as code or posing as team B's ClaimSchedule.
            declared = as_b.schedules.upsert(JobSpec(job_name="billing", schedule="@every 1s"))
            assert declared.outcome == "unchanged"
            assert declared.held_by and "team-a/billing" in declared.held_by
            impostor = spec_json(JobSpec(job_name="billing", schedule="@every 1s",
                                         source="operator", owner="team-b/steal"))
            run_sql(team_b.dsn, "SELECT * FROM cs_declare_schedule(%s)", [impostor])
            untouched()
        finally:
            as_b.close()

        # 3. Team B's databaseRef to a malformed DSN holding a password: a fixed reason.
        core.create_namespaced_secret(TEAM_B, secret("leaky-db", f"host=x password='{PASSWORD}"))
        api.create_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL, claimschedule(
            "leaky", "@every 1h", databaseRef={"name": "leaky-db"}))
        invalid = wait_for(lambda: ready(api, TEAM_B, "leaky"), "Ready=False on leaky",
                           log=operator.log)
        assert invalid["reason"] == "InvalidDatabaseRef"
        assert invalid["message"] == ("Secret team-b/leaky-db key 'dsn': the value is not a DSN"
                                      " libpq can parse")
        wait_for(lambda: events(served, None, "leaky"), "an Event about leaky")

        # 4. Team A's run, let go, completes once, its receipt recorded once.
        go_on.set()
        wait_for(lambda: [r[1] for r in run_rows(dsn, "billing")] == ["done"],
                 "team A's run done", log=operator.log)
        (done,) = run_rows(dsn, "billing")
        assert done[:4] == (run_id, "done", attempt, "team-a-0") and done[6] is None
        assert run_sql(dsn, "SELECT entity, run_id, attempt FROM job_effects"
                            " WHERE job_name = 'billing'") == [("invoice:1", run_id, attempt)]
        # Team B's agent ran its own job all along.
        wait_for(lambda: run_sql(dsn, "SELECT 1 FROM job_runs r JOIN job_effects e"
                                      " ON e.run_id = r.id WHERE r.job_name = 'reports'"
                                      " AND r.status = 'done' AND r.claimed_by = 'team-b-0'"),
                 "a done run of team B's job, with its receipt", log=operator.log)
    finally:
        go_on.set()
        for agent in agents:
            agent.stop()
    assert schedule_row(dsn, "billing") == [owned]
    assert len(run_rows(dsn, "billing")) == 1

    shown = "\n".join([
        json.dumps(api.list_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL)),
        json.dumps([x.body for x in served.emulator.sent("POST") if x.path.endswith("/events")],
                   default=str),
        json.dumps([x.body for x in served.emulator.sent("PATCH")], default=str),
        operator.log(),
    ])
    assert PASSWORD not in shown


def test_a_teams_agent_role_cannot_claim_another_teams_runs(
        dsn: str, store: Store, teams: tuple[Team, Team]) -> None:
    """Team B's agent, registering a handler under team A's job name, must not take its runs
    (and run its own code in their place)."""
    _, team_b = teams
    store.schedules.upsert(JobSpec(job_name="billing", schedule="@every 1h", source="operator",
                                  owner="team-a/billing"))  # as the operator writes it
    store.listings.request_runs("billing", [datetime.now(UTC) - timedelta(seconds=5)], "manual")
    (active_since,) = run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval"
                                   " '1 hour' RETURNING active_since")[0]
    due = datetime.now(UTC) - timedelta(seconds=1)
    as_b = Store(team_b.dsn)
    as_b.open()
    try:
        taken = as_b.claims.reclaim("team-b-0", ["billing"], 1)
        for lease in taken:
            as_b.claims.complete("team-b-0", [Completion(lease, "done")])
        claimed = as_b.claims.claim("team-b-0", [Candidate("billing", due, active_since)], 1)
    finally:
        as_b.close()
    assert taken == []
    assert claimed is not None and [c.outcome for c in claimed[1]] == ["inactive"]
    assert run_sql(dsn, "SELECT status, claimed_by FROM job_runs") == [("pending", None)]


def agent_row(dsn: str, agent_id: str) -> tuple[Any, ...]:
    (row,) = run_sql(dsn, "SELECT handlers, stopped_at IS NULL, login_role FROM agents"
                          " WHERE agent_id = %s", [agent_id])
    return row


def test_a_team_can_neither_rewrite_nor_stop_another_teams_agent_and_lists_only_its_jobs(
        dsn: str, store: Store, teams: tuple[Team, Team]) -> None:
    """Agent ids are not secret: team B's role, knowing team A's agent's, calls the presence
    functions with it. Team A's row keeps its job list and stays alive, so a manual run of
    team A's job is taken as before; team B's own row lists only the jobs of its scope."""
    team_a, team_b = teams
    for job, team in (("billing", TEAM_A), ("reports", TEAM_B)):
        store.schedules.upsert(JobSpec(job_name=job, schedule="@yearly", source="operator",
                                      owner=f"{team}/{job}"))
    ran = threading.Event()
    agent = Agent(team_a.dsn, agent_id="team-a-0", migrate=False, housekeeping_seconds=0.3,
                  shutdown_grace_seconds=2)
    agent.job("billing")(lambda run: ran.set())
    with agent:
        wait_for(lambda: agent_row(dsn, "team-a-0")[:2] == (["billing"], True),
                 "team A's presence")
        presence = ("SELECT * FROM cs_housekeeping_v2(%s, 'h', NULL, NULL, %s, 'v', 9, 't')")
        (refused,) = run_sql(team_b.dsn, presence, ["team-a-0", ["reports"]])
        assert refused[0] == 0  # present: the row is not the caller's
        assert run_sql(team_b.dsn, "SELECT * FROM cs_agent_stopped_v2('team-a-0')") == []
        assert agent_row(dsn, "team-a-0")[:2] == (["billing"], True)
        run_sql(team_b.dsn, presence, ["team-b-0", ["reports", "billing", "payroll"]])
        assert agent_row(dsn, "team-b-0")[0] == ["reports"]
        assert [agent_row(dsn, a)[2] for a in ("team-a-0", "team-b-0")] == [
            team_a.role, team_b.role]
        store.listings.request_runs("billing", [datetime.now(UTC) - timedelta(seconds=1)], "manual")
        assert ran.wait(15), "team A's agent never took the manual run of its job"
    wait_for(lambda: run_sql(dsn, "SELECT status, claimed_by FROM job_runs") == [
        ("done", "team-a-0")], "the manual run done by team A's agent")


def test_a_team_reads_only_its_own_jobs_rows_with_its_roles_and_in_the_web_view(
        dsn: str, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    """Team B's agent role and its team role (`claimsched roles --team-role`: the CLI and the
    web view) see team B's schedules, runs, receipts and agents only; team A's job is as
    unknown to them: neither listed, triggered nor suspended."""
    import socket
    import subprocess
    import sys
    import urllib.request
    from pathlib import Path

    from claimsched.tools.postgres import free_port

    suffix = f"{os.getpid()}_{next(_counter)}"
    made: dict[str, str] = {}
    for namespace, job in JOBS.items():
        agent_role = f"{namespace.replace('-', '_')}_agent_{suffix}"
        team_role = f"{namespace.replace('-', '_')}_people_{suffix}"
        assert claimsched(["roles", "--agent-role", agent_role, "--operator-role",
                           f"tenancy_operator_{suffix}", "--jobs", job, "--team-role",
                           team_role, "--dsn", dsn]) == 0
        for role in (agent_role, team_role):
            password = secrets.token_hex(12)
            run_sql(dsn, sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                                     sql.Literal(password)))
            made[role] = psycopg.conninfo.make_conninfo(dsn, user=role, password=password)
    b_agent, b_people = (made[f"team_b_{kind}_{suffix}"] for kind in ("agent", "people"))
    for job, namespace in (("billing", TEAM_A), ("reports", TEAM_B)):
        store.schedules.upsert(JobSpec(job_name=job, schedule="@yearly", source="operator",
                                      owner=f"{namespace}/{job}"))
        store.listings.request_runs(job, [datetime.now(UTC) - timedelta(seconds=5)], "manual")
        (lease,) = store.claims.reclaim(f"{namespace}-0", [job], 1)
        store.receipts.record(f"{namespace}-0", lease, "sent")
        store.claims.complete(f"{namespace}-0", [Completion(lease, "done")])
        store.claims.housekeeping(f"{namespace}-0", [job], {
            "hostname": "h", "pod": None, "namespace": namespace, "version": "t",
            "ttl_seconds": 60, "tzdata": "t"})
    try:
        for login in (b_agent, b_people):
            assert run_sql(login, "SELECT job_name FROM job_schedule") == [("reports",)]
            assert run_sql(login, "SELECT DISTINCT job_name FROM job_runs") == [("reports",)]
        assert run_sql(b_people, "SELECT DISTINCT job_name FROM job_effects") == [("reports",)]
        assert run_sql(b_people, "SELECT agent_id FROM agents") == [("team-b-0",)]
        capsys.readouterr()
        assert claimsched(["runs", "--json", "--dsn", b_people]) == 0
        assert {r["job_name"] for r in json.loads(capsys.readouterr().out)} == {"reports"}
        assert claimsched(["trigger", "billing", "--dsn", b_people]) != 0
        assert claimsched(["suspend", "billing", "--dsn", b_people]) != 0
        assert run_sql(dsn, "SELECT count(*), bool_and(enabled) FROM job_runs r JOIN"
                            " job_schedule s USING (job_name) WHERE job_name = 'billing'") \
            == [(1, True)]

        port = free_port()
        web = subprocess.Popen(
            [str(Path(sys.executable).with_name("claimsched")), "web", "--dsn", b_people,
             "--bind", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            def listening() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                except OSError:
                    return False
                return True

            wait_for(listening, "claimsched web to listen")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/schedules") as answer:
                shown = json.loads(answer.read())
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/").read().decode()
        finally:
            web.terminate()
            web.wait(10)
        assert [s["job"] for s in shown["schedules"]] == ["reports"], shown
        assert "reports" in page and "billing" not in page
    finally:
        for role in [*made, f"tenancy_operator_{suffix}"]:
            run_sql(dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            run_sql(dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_scope_by_name_holds_no_other_teams_job_that_the_name_would_match_as_a_pattern(
        dsn: str, store: Store) -> None:
    """Team B's role, scoped with `--jobs daily_report` (one job, its own), must not claim team
    A's `daily-report`, which the LIKE pattern daily_report would match ('_': any one
    character)."""
    suffix = f"{os.getpid()}_{next(_counter)}"
    role = f"team_b_agent_{suffix}"
    assert claimsched(["roles", "--agent-role", role, "--operator-role",
                       f"tenancy_operator_{suffix}", "--jobs", "daily_report", "--dsn", dsn]) == 0
    password = secrets.token_hex(12)
    run_sql(dsn, sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                             sql.Literal(password)))
    team_b = psycopg.conninfo.make_conninfo(dsn, user=role, password=password)
    try:
        for job, owner in (("daily-report", "team-a/daily-report"),
                           ("daily_report", "team-b/daily-report")):
            store.schedules.upsert(JobSpec(job_name=job, schedule="@yearly", source="operator",
                                          owner=owner))
            store.listings.request_runs(job, [datetime.now(UTC) - timedelta(seconds=5)], "manual")
        (active_since,) = run_sql(dsn, "UPDATE job_schedule SET active_since = now() - interval"
                                       " '1 hour' RETURNING active_since")[0]
        as_b = Store(team_b)
        as_b.open()
        try:
            taken = as_b.claims.reclaim("team-b-0", ["daily-report", "daily_report"], 4)
            claimed = as_b.claims.claim("team-b-0", [Candidate(
                "daily-report", datetime.now(UTC) - timedelta(seconds=1), active_since)], 1)
        finally:
            as_b.close()
        assert [t.job_name for t in taken] == ["daily_report"]
        assert claimed is not None and [c.outcome for c in claimed[1]] == ["inactive"]
        assert run_sql(dsn, "SELECT status FROM job_runs WHERE job_name = 'daily-report'") == [
            ("pending",)]
    finally:
        for name in (role, f"tenancy_operator_{suffix}"):
            run_sql(dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            run_sql(dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_function_another_team_put_in_the_schema_never_runs_inside_a_claim(
        dsn: str, store: Store, teams: tuple[Team, Team]) -> None:
    """Team B's role, let CREATE in claimsched's schema (a grant made after `migrate`, which
    would have refused it), puts a gen_random_uuid() there that empties the scopes and fixes
    the lease token, and a now() that never ends a lease. Team A's agent claims and runs its
    job all the same: the built-in functions are found first, inside every function."""
    team_a, team_b = teams
    run_sql(dsn, sql.SQL("GRANT CREATE ON SCHEMA claimsched TO {}").format(
        sql.Identifier(team_b.role)))
    run_sql(team_b.dsn, HIJACK)
    store.schedules.upsert(JobSpec(job_name="billing", schedule="@yearly", source="operator",
                                  owner="team-a/billing"))
    ran = threading.Event()
    agent = Agent(team_a.dsn, agent_id="team-a-0", migrate=False, housekeeping_seconds=0.3,
                  shutdown_grace_seconds=2)
    agent.job("billing")(lambda run: ran.set())
    with agent:
        store.listings.request_runs("billing", [datetime.now(UTC) - timedelta(seconds=1)], "manual")
        assert ran.wait(15), "team A's agent never ran its job"
        wait_for(lambda: run_sql(dsn, "SELECT status FROM job_runs") == [("done",)], "done")
    assert run_sql(dsn, "SELECT count(*) FROM agent_scopes") == [(2,)]
    assert run_sql(dsn, "SELECT lease_token::text <> '00000000-0000-0000-0000-000000000001',"
                        " finished_at < 'infinity' FROM job_runs") == [(True, True)]
