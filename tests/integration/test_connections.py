"""Connections as deployments have them: timeouts and keepalives, durable commits, a standby
refused, pgbouncer in transaction mode (no session state, nothing prepared), durability shown."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from claimsched import Agent
from claimsched.cli import main
from claimsched.db import NOTIFY_AGENTS, NOTIFY_RUNS, NOTIFY_SCHEDULES, Store
from claimsched.db.queries import query
from claimsched.db.session import SessionOptions
from claimsched.errors import ConfigurationError, DatabaseError, DatabaseUnavailable
from claimsched.records import Lease
from claimsched.tools.postgres import TemporaryPostgres
from tests.helpers.pgbouncer import pgbouncer
from tests.helpers.polling import wait_for

from .support import due, sql


def _settings(conn: psycopg.Connection[object]) -> dict[str, str]:
    names = (
        "search_path",
        "statement_timeout",
        "lock_timeout",
        "idle_in_transaction_session_timeout",
        "synchronous_commit",
    )
    return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}  # type: ignore[index]


def test_every_agent_connection_has_timeouts_keepalives_and_waits_for_durable_commits(
    dsn: str,
) -> None:
    # the test server runs with synchronous_commit = off: our commits must still wait
    assert sql(dsn, "SHOW synchronous_commit") == [("off",)]
    store = Store(dsn)
    store.open()
    try:
        with store.connection() as conn:
            found = _settings(conn)  # type: ignore[arg-type]
            options = {o.keyword.decode(): o.val for o in conn.pgconn.info}
        assert found == {
            "search_path": '"claimsched", public',
            "statement_timeout": "30s",
            "lock_timeout": "10s",
            "idle_in_transaction_session_timeout": "1min",
            "synchronous_commit": "on",
        }
        assert options["keepalives_idle"] == b"10" and options["keepalives_count"] == b"3"
        assert options["tcp_user_timeout"] == b"25000"
        # one host: checked by the settings statement itself (see the pooler test below)
        assert options["target_session_attrs"] == b"any"
    finally:
        store.close()
    several = SessionOptions().connect_kwargs("host=db-0,db-1 port=5432 dbname=app")
    assert several["target_session_attrs"] == "read-write"


def test_a_dsn_whose_only_host_is_read_only_is_refused_naming_target_session_attrs() -> None:
    with TemporaryPostgres(settings={"default_transaction_read_only": "on"}) as pg:
        store = Store(pg.dsn)
        with pytest.raises(DatabaseUnavailable, match="target_session_attrs=read-write"):
            store.open(timeout=3)


def test_durability_of_a_lone_server_is_standalone_in_agents_and_schedules(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = Agent(dsn, agent_id="a1", housekeeping_seconds=0.2)

    @agent.job("tick", schedule="@yearly")
    def tick(run: object) -> None:
        pass

    with agent:
        assert agent.store.identity.current is not None
        assert agent.store.identity.current.durability == "standalone"
    assert main(["agents", "--dsn", dsn, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["durability"] == "standalone"
    assert main(["schedules", "--dsn", dsn, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["durability"] == "standalone"


# -- pgbouncer -------------------------------------------------------------------------------


def _claim_one(store: Store, job: str) -> Lease:
    """Claim the job's latest due occurrence (the schedule starts afresh when written)."""

    def attempt() -> Lease | None:
        now = store.db_now().replace(microsecond=0)
        claimed = store.claims.claim("a1", due(store, job, now), 1)
        assert claimed is not None
        (result,) = claimed[1]
        return result.lease

    return wait_for(attempt, "a claimed occurrence", timeout=5)


def test_through_pgbouncer_in_transaction_mode_nothing_lasts_beyond_a_transaction(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pgbouncer(dsn, pool_size=1) as bouncer:
        pooled = bouncer.dsn_for(dsn)
        store = Store(pooled)
        with caplog.at_level(logging.INFO, "claimsched.store"):
            store.open()
        try:
            assert store.pooling == "transaction"
            assert "connection pooler" in caplog.text and "polling every 1 s" in caplog.text
            with store.connection() as conn:
                # inside our transaction, our settings hold
                assert _settings(conn)["search_path"] == '"claimsched", public'  # type: ignore[arg-type]
                assert _settings(conn)["synchronous_commit"] == "on"  # type: ignore[arg-type]
            store.schedules.upsert(_spec("tick"))
            for _ in range(8):  # past psycopg's prepare threshold (5)
                assert store.schedules.load()[0].job_name == "tick"
                store.claims.heartbeat("a1", [])
            lease = _claim_one(store, "tick")
            assert store.claims.heartbeat("a1", [lease]) == {lease.id}
            # a receipt held open across the caller's block: a savepoint in our transaction
            with store.receipts.hold("a1", lease, "once") as (owned, inserted):
                assert owned and inserted
            assert store.receipts.record("a1", lease, "once") == (True, False)
            assert store.claims.release("a1", [lease]) == 1  # counts what it changed
            assert store.schedules.disable("tick")
            # another client of the same (only) server connection sees none of it
            with psycopg.connect(pooled, autocommit=True, prepare_threshold=None) as other:
                left = _settings(other)  # type: ignore[arg-type]
                prepared = other.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            assert left["search_path"] == '"$user", public'
            assert left["synchronous_commit"] == "off" and left["statement_timeout"] == "0"
            assert prepared == (0,)
            assert sql(dsn, "SELECT count(*) FROM claimsched.job_effects") == [(1,)]
        finally:
            store.close()


def _spec(job: str):  # type: ignore[no-untyped-def]
    from claimsched.schedule.specs import job_spec

    return job_spec(job_name=job, schedule="@every 1s", source="code")


def _read_only(server_dsn: str, on: bool) -> None:
    sql(server_dsn, f"ALTER SYSTEM SET default_transaction_read_only = {'on' if on else 'off'}")
    sql(server_dsn, "SELECT pg_reload_conf()")


def test_a_pooler_repeating_a_read_only_servers_parameters_does_not_lock_agents_out() -> None:
    """pgbouncer answers every new client with the parameters its pool saw first. A pool that
    first met its server read-only (a standby being promoted, when a failover moved the pooler)
    still says so once the server takes writes, and a libpq asked for target_session_attrs=
    read-write then refuses every new connection: new agents could not start until the pooler
    restarted. A single-host DSN is checked on the server, in the statement that sets up each
    connection or transaction."""
    with TemporaryPostgres(settings={"default_transaction_read_only": "on"}) as pg, \
            pgbouncer(pg.dsn) as bouncer:
        pooled = bouncer.dsn_for(pg.dsn)
        with psycopg.connect(pooled, autocommit=True) as first:  # the pool meets a read-only server
            assert first.info.parameter_status("default_transaction_read_only") == "on"
        store = Store(pooled)
        with pytest.raises(DatabaseUnavailable, match="read-only"):
            store.open(timeout=3)  # read-only for real: refused, as a standby is
        _read_only(pg.dsn, False)
        with psycopg.connect(pooled, autocommit=True) as stale:
            assert stale.info.parameter_status("default_transaction_read_only") == "on"
        store = Store(pooled)
        try:
            store.open(timeout=5)
            store.admin.migrate()  # writes, through the pooler
            assert store.pooling == "transaction"
            _read_only(pg.dsn, True)
            with pytest.raises(DatabaseUnavailable, match="read-only"), store.connection() as conn:
                conn.execute(query("db_now"))
        finally:
            store.close()


def test_pgbouncer_in_statement_mode_is_refused_with_a_clear_error(dsn: str) -> None:
    with pgbouncer(dsn, pool_mode="statement") as bouncer:
        store = Store(bouncer.dsn_for(dsn))
        with pytest.raises(ConfigurationError, match=r"statement mode.*pool_mode = transaction"):
            store.open()


def test_a_listen_dsn_through_a_pooler_is_refused(dsn: str) -> None:
    with pgbouncer(dsn) as bouncer:
        agent = Agent(bouncer.dsn_for(dsn), listen_dsn=bouncer.dsn_for(dsn))

        @agent.job("tick", schedule="@yearly")
        def tick(run: object) -> None:
            pass

        with pytest.raises(ConfigurationError, match=r"listen_dsn .* pooler"):
            agent.start()


@pytest.mark.parametrize("listen", [False, True], ids=["poll", "listen_dsn"])
def test_an_agent_behind_pgbouncer_hears_of_a_manual_run_promptly(
    dsn: str, listen: bool, tmp_path: Path
) -> None:
    done: list[str] = []
    with pgbouncer(dsn) as bouncer:
        agent = Agent(
            bouncer.dsn_for(dsn),
            agent_id="a1",
            listen_dsn=dsn if listen else None,
            poll_seconds=0.3,
            schedule_refresh_seconds=600,
            housekeeping_seconds=600,
        )

        @agent.job("report", schedule="@yearly")
        def report(run: object) -> None:
            done.append(str(run))

        with agent:
            store = Store(bouncer.dsn_for(dsn))
            try:
                store.listings.request_runs("report", [store.db_now()], "manual")
            finally:
                store.close()
            # neither the schedule refresh nor housekeeping (600 s) can be what woke it
            wait_for(lambda: done, "the manual run", timeout=5)


def test_a_stopping_agent_behind_a_paused_pooler_stops_within_its_grace_and_margin(
    dsn: str,
) -> None:
    """pgbouncer PAUSEd holds every new transaction before a server sees it, for as long as it
    pauses: neither statement_timeout nor keepalives end that wait. The hand-back of a run
    still running at the end of the grace must not wait for RESUME past the stop's margin."""
    from claimsched.agent import STOP_MARGIN

    started, finish = threading.Event(), threading.Event()
    with pgbouncer(dsn) as bouncer:
        agent = Agent(
            bouncer.dsn_for(dsn),
            agent_id="a1",
            poll_seconds=0.3,
            schedule_refresh_seconds=600,
            housekeeping_seconds=600,
        )

        @agent.job("long", schedule="@yearly", lease_seconds=30, heartbeat_seconds=5)
        def long(run: object) -> None:
            started.set()
            finish.wait(60)

        agent.start()
        stopper = threading.Thread(target=agent.stop, kwargs={"grace": 0.5})
        try:
            store = Store(dsn)
            try:
                store.listings.request_runs("long", [store.db_now()], "manual")
            finally:
                store.close()
            assert started.wait(10), "the run did not start"
            bouncer.pause()
            stopper.start()
            stopper.join(0.5 + STOP_MARGIN + 3)
            assert not stopper.is_alive(), "stop() waited for the pooler past its margin"
        finally:
            bouncer.resume()
            finish.set()
            if not stopper.is_alive() and not stopper.ident:
                agent.stop()
            stopper.join(30)


def test_dsn_options_win_over_claimsched_defaults(dsn: str) -> None:
    store = Store(make_conninfo(dsn, keepalives_idle="42", target_session_attrs="any"))
    store.open()
    try:
        with store.connection() as conn:
            options = {o.keyword.decode(): o.val for o in conn.pgconn.info}
        assert options["keepalives_idle"] == b"42" and options["target_session_attrs"] == b"any"
    finally:
        store.close()


def test_the_listener_listens_again_after_a_restart_and_reports_what_it_missed() -> None:
    with TemporaryPostgres() as pg:
        store = Store(pg.dsn)
        store.admin.migrate()
        store.open()
        listener = store.listener()
        try:
            listener.listen()
            assert listener.wait(0.05) == set()
            pg.restart("fast")

            def after_restart() -> set[str] | None:
                try:
                    return listener.wait(0.2)
                except DatabaseError:  # the connection is gone: the next wait reconnects
                    return None

            # connected and listening again: notifications sent meanwhile are lost, so it says
            # that anything may have happened
            wait_for(
                lambda: after_restart() == {NOTIFY_RUNS, NOTIFY_SCHEDULES, NOTIFY_AGENTS},
                "the listener to report what it missed",
                timeout=10,
            )
            assert listener.wait(0.05) == set()
            sql(pg.dsn, "SELECT pg_notify(%s, 'claimsched')", [NOTIFY_RUNS])
            wait_for(lambda: listener.wait(0.2) == {NOTIFY_RUNS}, "the notification", timeout=5)
        finally:
            listener.dispose()
            store.close()


def test_an_agent_started_while_its_database_is_away_waits_for_it_and_then_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pg = TemporaryPostgres().init()  # not started yet: the port refuses connections
    agent = Agent(pg.dsn, agent_id="early", start_timeout_seconds=60)
    agent.job("j", schedule="@daily")(lambda run: None)
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            agent.start()
            outcome.append(None)
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)

    starter = threading.Thread(target=start)
    try:
        with caplog.at_level(logging.WARNING, logger="claimsched"):
            starter.start()
            wait_for(lambda: "trying again" in caplog.text, "the agent to try again", timeout=20)
            pg.start()
            starter.join(timeout=60)
        assert outcome == [None], outcome
        assert sql(pg.dsn, "SELECT count(*) FROM claimsched.agents WHERE agent_id = 'early'") == [
            (1,)
        ]
    finally:
        agent.stop(grace=1)
        starter.join(timeout=10)
        pg.stop()
        pg.destroy()


def test_a_store_whose_first_pool_fill_timed_out_opens_once_the_database_is_back(
    dsn: str,
) -> None:
    """The database went away between the direct first connection and the pool's first fill:
    psycopg_pool closes a pool whose first fill timed out, for good. The agent's start retries
    Store.open while the database is away; each retry must have a pool it can open."""
    from bench.ha.blackhole import Blackhole
    from psycopg.conninfo import conninfo_to_dict

    from claimsched.errors import DatabaseAway

    proxy = Blackhole(int(conninfo_to_dict(dsn)["port"]))
    store = Store(make_conninfo(dsn, port=str(proxy.port)), max_size=2)
    try:
        first_pool = store.pool
        fill = first_pool.open

        def fill_during_an_outage(*args: object, **kwargs: object) -> None:
            proxy.blackhole()  # after the direct connection, before the pool's
            fill(*args, **kwargs)  # type: ignore[arg-type]

        first_pool.open = fill_during_an_outage  # type: ignore[method-assign]
        with pytest.raises(DatabaseAway):
            store.open(timeout=1.0)
        proxy.restore()
        store.open(timeout=5.0)  # the database is back
        assert store.db_now() is not None and store.pool is not first_pool
    finally:
        store.close()
        proxy.close()
