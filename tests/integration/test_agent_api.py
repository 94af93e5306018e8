"""The SQL API agents call has versions (sql/functions/, migration 0017): the schema serves
claimsched 0.1.0's (API 1) beside this release's (API 2); presence says which one each agent
calls; an agent accepts a newer schema that still serves its API; and migrate never drops a
version a live agent still calls. tests/upgrade runs the real 0.1.0 agents through it."""

from __future__ import annotations

import pytest

from claimsched.cli import main as claimsched
from claimsched.db import AGENT_API, SCHEMA_VERSION, Store, migrations
from claimsched.errors import SchemaMismatch

from .support import PRESENCE
from .support import sql as run_sql

AGENT_FUNCTIONS = ("cs_claim", "cs_reclaim", "cs_heartbeat", "cs_complete", "cs_housekeeping",
                   "cs_release", "cs_agent_stopped", "cs_effect", "cs_declare_schedule")

#: API 2 as released in claimsched 0.2.0: a change to any of these is API 3, beside it.
API_2 = {
    "cs_claim_v2": (
        "p_agent_id text, p_capacity integer, p_jobs text[], p_fire_times timestamp with time "
        "zone[], p_wants text[], p_reasons text[], p_latest boolean[], p_since timestamp with "
        "time zone[]",
        "TABLE(job_name text, fire_time timestamp with time zone, outcome text, id bigint, "
        "attempt integer, lease_token uuid, lease_until timestamp with time zone, started_at "
        "timestamp with time zone, lease_seconds integer, heartbeat_seconds integer, "
        "max_attempts integer, retry_on_failure boolean, notified boolean, db_now timestamp "
        "with time zone)"),
    "cs_reclaim_v2": (
        "p_agent_id text, p_jobs text[], p_capacity integer",
        "TABLE(id bigint, job_name text, fire_time timestamp with time zone, kind text, attempt "
        "integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp "
        "with time zone, orphan_count integer, lease_seconds integer, heartbeat_seconds "
        "integer, max_attempts integer, retry_on_failure boolean, db_now timestamp with time "
        "zone)"),
    "cs_heartbeat_v2": (
        "p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts "
        "integer[], p_lease_tokens uuid[], p_leases double precision[]",
        "TABLE(id bigint)"),
    "cs_complete_v2": (
        "p_agent_id text, p_ids bigint[], p_fire_times timestamp with time zone[], p_attempts "
        "integer[], p_lease_tokens uuid[], p_statuses text[], p_errors text[], p_retries "
        "boolean[], p_max_attempts integer[], p_backoffs double precision[]",
        "TABLE(id bigint, retry_at timestamp with time zone)"),
    "cs_housekeeping_v2": (
        "p_agent_id text, p_hostname text, p_pod text, p_namespace text, p_handlers text[], "
        "p_version text, p_ttl_seconds integer, p_tzdata text",
        "TABLE(present bigint, orphaned bigint, exhausted bigint, overdue bigint, claimable "
        "boolean, notified boolean, db_now timestamp with time zone, system_identifier text, "
        "timeline integer, durability text, joined boolean, peers text[], next_expiry "
        "timestamp with time zone)"),
    "cs_release_v2": ("p_agent_id text, p_ids bigint[], p_lease_tokens uuid[]",
                      "TABLE(id bigint)"),
    "cs_agent_stopped_v2": ("p_agent_id text", "TABLE(agent_id text)"),
    "cs_effect_v2": (
        "p_run_id bigint, p_fire_time timestamp with time zone, p_agent_id text, p_attempt "
        "integer, p_lease_token uuid, p_entity text, p_job_name text",
        "TABLE(owned boolean, inserted boolean)"),
    "cs_declare_schedule_v2": (
        "p_spec jsonb",
        "TABLE(source text, owner text, written boolean, created boolean)"),
}


def _shapes(dsn: str, names: list[str]) -> dict[str, tuple[str, str]]:
    rows = run_sql(dsn, "SELECT p.proname, pg_get_function_arguments(p.oid),"
                        " pg_get_function_result(p.oid) FROM pg_proc p"
                        " WHERE p.pronamespace = 'claimsched'::regnamespace"
                        "   AND p.proname = ANY(%s)", [names])
    return {name: (arguments, result) for name, arguments, result in rows}


def test_the_schema_serves_api_2_as_released_and_api_1_with_its_shapes(dsn: str) -> None:
    assert AGENT_API == 2
    assert run_sql(dsn, "SELECT api, release FROM agent_apis ORDER BY api") == [
        (1, "0.1.0"), (2, "0.2.0")]
    assert _shapes(dsn, list(API_2)) == API_2
    # API 1 is API 2 under 0.1.0's names, but for housekeeping's later `next_expiry`.
    older = {name.removesuffix("_v2"): (arguments, result.replace(
        ", next_expiry timestamp with time zone", "")) for name, (arguments, result) in
        API_2.items()}
    assert _shapes(dsn, list(AGENT_FUNCTIONS)) == older


def test_presence_says_which_api_an_agent_calls_as_it_changes_release(
        store: Store, dsn: str) -> None:
    # alive for 10 minutes: a loaded machine's seconds between the calls do not end it
    store.claims.housekeeping("a1", ["nightly"],
                              {**PRESENCE, "version": "0.2.0", "ttl_seconds": 600})
    agent = "SELECT version, api FROM agents WHERE agent_id = 'a1'"
    assert run_sql(dsn, agent) == [("0.2.0", 2)]
    # The same agent id, rolled back to 0.1.0: its housekeeping is API 1's.
    (present,) = run_sql(dsn, "SELECT present FROM cs_housekeeping('a1', 'h', NULL, NULL, NULL,"
                              " '0.1.0', 600, 't')")
    assert present == (1,)
    assert run_sql(dsn, agent) == [("0.1.0", 1)]
    assert [(api.api, api.callers) for api in store.admin.agent_apis()] == [
        (1, [("a1", "0.1.0")]), (2, [])]


def test_an_agent_accepts_a_newer_schema_only_while_it_serves_the_agents_api(
        store: Store, dsn: str) -> None:
    run_sql(dsn, "INSERT INTO schema_version VALUES (%s)", [SCHEMA_VERSION + 1])
    store.admin.check_version(AGENT_API)
    with pytest.raises(SchemaMismatch, match="newer than this claimsched"):
        store.admin.check_version()  # the CLI and the operator: their own version only
    run_sql(dsn, "DELETE FROM agent_apis WHERE api = %s", [AGENT_API])
    with pytest.raises(SchemaMismatch, match=f"no longer serves the agent API v{AGENT_API}"):
        store.admin.check_version(AGENT_API)


def test_migrate_refuses_to_drop_an_api_version_a_live_agent_calls(
        store: Store, dsn: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    files = migrations.migration_files()
    later = (SCHEMA_VERSION + 1, "later_drop_api_1.sql", "DELETE FROM agent_apis WHERE api = 1")
    monkeypatch.setattr(migrations, "migration_files", lambda: [*files, later])
    run_sql(dsn, "SELECT * FROM cs_housekeeping('old-0', 'h', NULL, NULL, NULL, '0.1.0', 60,"
                 " 't')")
    with pytest.raises(SchemaMismatch, match=r"drop version 1 .* old-0 \(0\.1\.0\)"):
        store.admin.migrate()
    assert run_sql(dsn, "SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    assert run_sql(dsn, "SELECT api FROM agent_apis ORDER BY api") == [(1,), (2,)]
    run_sql(dsn, "SELECT * FROM cs_agent_stopped('old-0')")  # the last 0.1.0 agent is gone
    capsys.readouterr()
    assert claimsched(["migrate", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "agent API versions dropped: v1" in out, out
    assert run_sql(dsn, "SELECT api FROM agent_apis") == [(2,)]
