"""Migrations: one chain for a fresh database and an upgrade alike, run once under concurrency,
versions checked."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from claimsched import SchemaMismatch
from claimsched.db import SCHEMA_VERSION, Store
from claimsched.db.queries import migration_files
from tests.helpers.polling import wait_for

from .support import sql


def test_fifty_processes_migrating_at_once_migrate_once(empty_dsn: str) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            results.append(Store(empty_dsn).admin.migrate())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(map(len, results)) == [0] * 49 + [len(migration_files())]
    assert sql(empty_dsn, "SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION,)]


def test_a_version_1_database_with_runs_is_upgraded_to_forbids_guard(empty_dsn: str) -> None:
    ((_, _, initial), *_) = migration_files()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA claimsched")
        conn.execute("SET search_path = claimsched")
        conn.execute(initial)
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute("INSERT INTO job_schedule (job_name, schedule) VALUES ('job', '@daily')")
        conn.execute("INSERT INTO job_runs (job_name, fire_time, status, claimed_by) "
                     "VALUES ('job', now(), 'running', 'a')")
    assert Store(empty_dsn).admin.migrate() == [version for version, _, _ in migration_files()][1:]
    assert sql(empty_dsn, "SELECT job_name, status FROM forbid_in_progress('{job}')") == [
        ("job", "running")
    ]


def test_migrate_is_idempotent_and_creates_partitions_ahead(dsn: str) -> None:
    assert Store(dsn).admin.migrate() == []
    names = [r[0] for r in sql(dsn, "SELECT relname FROM pg_class WHERE relname ~ '^job_runs_p'")]
    assert len(names) >= 4


def test_an_older_or_newer_schema_is_refused_with_a_clear_error(store: Store) -> None:
    sql(store.dsn, "INSERT INTO schema_version VALUES (%s)", [SCHEMA_VERSION + 1])
    with pytest.raises(SchemaMismatch, match="newer than this claimsched"):
        store.admin.check_version()
    sql(store.dsn, "DELETE FROM schema_version")
    with pytest.raises(SchemaMismatch, match="run `claimsched migrate`"):
        store.admin.check_version()


def test_maintenance_moves_strays_out_of_the_default_partition_and_drops_old_history(
    store: Store,
) -> None:
    ahead = sql(store.dsn, "SELECT date_trunc('month', now()) + interval '2 months'")[0][0]
    partition = f"job_runs_p{ahead:%Y%m}"
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP TABLE claimsched.{}").format(
            psycopg.sql.Identifier(partition)))
    sql(store.dsn, "INSERT INTO job_schedule (job_name, schedule) VALUES ('j', '@daily')")
    sql(
        store.dsn,
        "INSERT INTO job_runs (job_name, fire_time, status) VALUES "
        "('j', %s + interval '3 days', 'done'), "
        "('j', now() - interval '200 days', 'done'), ('j', now(), 'done')",
        [ahead],
    )
    summary = Store(store.dsn).admin.maintain(retention_days=90)
    assert summary.partitions_created == [partition]
    assert summary.default_rows_purged == 1
    where = sql(store.dsn, "SELECT tableoid::regclass::text FROM job_runs ORDER BY fire_time")
    assert where[-1] == (partition,)
    assert len(where) == 2


def _wait_for_lock_wait(dsn: str, application: str) -> None:
    wait_for(lambda: sql(dsn, "SELECT 1 FROM pg_stat_activity WHERE application_name = %s"
                              " AND wait_event_type = 'Lock'", [application]),
             f"{application} to wait for a lock", timeout=10)


@pytest.mark.parametrize("change", ["create a partition", "drop old history"])
def test_maintenance_takes_its_locks_in_the_order_statements_do_and_never_deadlocks(
    store: Store, change: str
) -> None:
    """A statement locks job_runs, then the partition it routes to; maintenance must lock in
    that order too. The other way round, a claim or a receipt that holds job_runs and wants
    the default partition deadlocks with maintenance that holds the default partition and
    wants job_runs (it killed starting agents: issue 16, item 14)."""
    partitions = sorted(row[0] for row in sql(store.dsn, "SELECT relname FROM pg_class WHERE"
                                                         " relname ~ '^job_runs_p[0-9]{6}$'"))
    if change == "create a partition":
        sql(store.dsn, f"DROP TABLE {partitions[-1]}")  # maintenance will create it again
        retention = 90
    else:
        sql(store.dsn, "CREATE TABLE job_runs_p200001 PARTITION OF job_runs"
                       " FOR VALUES FROM ('2000-01-01') TO ('2000-02-01')")
        retention = 1
    errors: list[BaseException] = []
    statement = psycopg.connect(store.dsn, application_name="a-claim")
    statement.execute("SET search_path = claimsched, public")
    statement.execute("LOCK TABLE ONLY job_runs IN ROW EXCLUSIVE MODE")  # as an INSERT does

    def maintain() -> None:
        try:
            maintenance = make_conninfo(store.dsn, application_name="maintenance")
            Store(maintenance).admin.maintain(retention)
        except BaseException as exc:
            errors.append(exc)

    maintenance = threading.Thread(target=maintain)
    maintenance.start()
    try:
        _wait_for_lock_wait(store.dsn, "maintenance")
        # The statement now reaches the default partition, as a stray fire time routes there.
        statement.execute("SELECT count(*) FROM job_runs_default")
        statement.commit()
    finally:
        statement.close()
        maintenance.join(30)
    assert not errors, errors

