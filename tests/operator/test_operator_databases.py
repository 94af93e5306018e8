"""spec.databaseRef: a ClaimSchedule's row lives in the database its Secret names."""

from __future__ import annotations

import base64

import kubernetes
import psycopg
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import Store
from conftest import (
    Operator,
    assert_permissions_cover_the_operator,
    claimschedule,
    condition,
    create,
    events,
    sample,
)


def secret(name: str, dsn: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque",
            "data": {"dsn": base64.b64encode(dsn.encode()).decode()}}


def owners(dsn: str) -> dict[str, str]:
    """job_name -> owner of the operator's rows in that database (none before migrations)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('claimsched.job_schedule')").fetchone() == (None,):
            return {}
        return dict(conn.execute("SELECT job_name, owner FROM claimsched.job_schedule"
                                 " WHERE source = 'operator'").fetchall())


def rows(dsn: str) -> list[tuple[str, bool, str | None]]:
    """(job_name, enabled, owner) of every schedule row in that database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT job_name, enabled, owner FROM claimsched.job_schedule "
                            "ORDER BY job_name").fetchall()


def test_database_ref_puts_the_row_in_the_database_its_secret_names(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        core: kubernetes.client.CoreV1Api, operator: Operator, store: Store, dsn: str,
        empty_dsn: str) -> None:
    core.create_namespaced_secret("default", secret("reports-db", empty_dsn))
    core.create_namespaced_secret("default", secret("reports-db-copy", empty_dsn))

    # Disabled (the default): a databaseRef makes the resource invalid, with the reason.
    operator.start()
    create(api, claimschedule("remote", "@every 1h", databaseRef={"name": "reports-db"}))
    ready = wait_for(lambda: (c := condition(api, "remote", "Ready")) and
                     c["status"] == "False" and c, "Ready=False", log=operator.log)
    assert ready["reason"] == "DatabaseRefDisabled"
    assert "CLAIMSCHED_OPERATOR_DATABASE_REFS=false" in ready["message"]
    assert events(served, "Invalid", "remote")[0]["message"].startswith("DatabaseRefDisabled:")
    assert owners(dsn) == {} and owners(empty_dsn) == {}
    operator.kill()

    # Enabled: the row lands in the Secret's database (migrated by the operator), not in the
    # default one; two Secrets with the same DSN share one Store.
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    operator.serve_metrics = True
    operator.start()
    create(api, claimschedule("remote-copy", "@every 1h", databaseRef={"name": "reports-db-copy",
                                                                       "key": "dsn"}))
    create(api, claimschedule("local", "@every 1h"))
    wait_for(lambda: len(owners(empty_dsn)) == 2, "both rows in the Secret's database",
             log=operator.log)
    assert owners(empty_dsn) == {"remote": "default/remote", "remote-copy": "default/remote-copy"}
    wait_for(lambda: owners(dsn), "local's row in the default database", log=operator.log)
    assert owners(dsn) == {"local": "default/local"}
    for name in ("remote", "remote-copy", "local"):
        wait_for(lambda n=name: (c := condition(api, n, "Synced")) and c["status"] == "True",
                 f"{name} synced", log=operator.log)
    wait_for(lambda: (m := operator.metrics()) and sample(
        m, "claimsched_operator_schedules", database="default") == 1 and m,
        "the schedules gauge", log=operator.log)
    # The shared Store is known by the Secret it was first opened for; its gauge shows both
    # schedules once a refresh has counted them (the refresh is not synchronous with Synced).
    def shared() -> set[object]:
        scraped = operator.metrics()
        return {sample(scraped, "claimsched_operator_schedules",
                       database=f"secret:default/{n}/dsn")
                for n in ("reports-db", "reports-db-copy")}

    wait_for(lambda: shared() == {2, None}, "the shared database's gauge", log=operator.log)
    assert operator.log().count("database secret:") == 1  # one Store opened for that database

    # databaseRef mode: reading Secrets is granted, and nothing else was asked for.
    assert_permissions_cover_the_operator(served, database_refs=True)


def test_a_rotated_secret_moves_the_schedule_without_touching_the_claimschedule(
        api: kubernetes.client.CustomObjectsApi, core: kubernetes.client.CoreV1Api,
        operator: Operator, empty_dsn: str, other_empty_dsn: str) -> None:
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    operator.start()
    core.create_namespaced_secret("default", secret("reports-db", "Not-Yet-A-Dsn"))
    create(api, claimschedule("rotated", "@every 1h", databaseRef={"name": "reports-db"}))
    wait_for(lambda: (c := condition(api, "rotated", "Ready")) and
             c["reason"] == "InvalidDatabaseRef", "InvalidDatabaseRef", log=operator.log)

    # The Secret is fixed, then rotated to another database: each is picked up by itself.
    for dsn in (empty_dsn, other_empty_dsn):
        core.patch_namespaced_secret("reports-db", "default", {
            "data": {"dsn": base64.b64encode(dsn.encode()).decode()}})
        wait_for(lambda d=dsn: owners(d) == {"rotated": "default/rotated"},
                 "the row in the Secret's database", log=operator.log)
        wait_for(lambda: (c := condition(api, "rotated", "Synced")) and c["status"] == "True",
                 "Synced", log=operator.log)
    # The row in the database the Secret named before is released (disabled, no owner), not
    # left firing there.
    wait_for(lambda: rows(empty_dsn) == [("rotated", False, None)],
             "the row released in the old database", log=operator.log)
    assert rows(other_empty_dsn) == [("rotated", True, "default/rotated")]
    generation = api.get_namespaced_custom_object(
        "claimsched.io", "v1alpha1", "default", "claimschedules", "rotated")["metadata"].get(
        "generation")
    assert generation in (None, 1)  # nobody touched the ClaimSchedule's spec
