"""spec.databaseRef: a ClaimSchedule's row lives in the database its Secret names."""

from __future__ import annotations

import base64

import kubernetes
import psycopg
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import Store
from claimsched_operator.databases import database_fingerprint
from conftest import (
    Operator,
    assert_permissions_cover_the_operator,
    claimschedule,
    condition,
    create,
    delete,
    events,
    fetch,
    patch,
    sample,
    status,
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
    assert "CLAIMSCHED_OPERATOR_DATABASE_REFS=false" in events(
        served, "DatabaseRefDisabled", "remote")[0]["message"]
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


def fingerprint_of(dsn: str) -> str:
    """The fingerprint the operator shows for that database (system identifier, name, schema)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT system_identifier::text, current_database()"
                           " FROM pg_control_system()").fetchone()
    assert row is not None
    return database_fingerprint(row[0], row[1], "claimsched")


def test_a_secret_rotated_while_the_operator_was_down_releases_the_row_where_it_was(
        served: Served, api: kubernetes.client.CustomObjectsApi,
        core: kubernetes.client.CoreV1Api, operator: Operator, empty_dsn: str,
        other_empty_dsn: str) -> None:
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    core.create_namespaced_secret("default", secret("reports-db", empty_dsn))
    operator.start()
    create(api, claimschedule("moved", "@every 1h", databaseRef={"name": "reports-db"}))
    wait_for(lambda: status(api, "moved").get("database"), "status.database", log=operator.log)
    old = fingerprint_of(empty_dsn)
    assert status(api, "moved")["database"] == old
    assert rows(empty_dsn) == [("moved", True, "default/moved")]

    # The Secret is rotated to another database while no operator runs: the one started after
    # it never had the old DSN. Its row is written in the new database, and the one left in the
    # old database is said to be there, by fingerprint (never a DSN).
    operator.kill()
    core.patch_namespaced_secret("reports-db", "default", {
        "data": {"dsn": base64.b64encode(other_empty_dsn.encode()).decode()}})
    operator.start()
    wait_for(lambda: owners(other_empty_dsn) == {"moved": "default/moved"},
             "the row in the new database", log=operator.log)
    left = wait_for(lambda: (c := condition(api, "moved", "PreviousDatabaseReleased")) and
                    c["status"] == "False" and c, "PreviousDatabaseReleased=False",
                    log=operator.log)
    assert left["reason"] == "PreviousDatabaseUnreachable" and old in left["message"]
    found = status(api, "moved")
    assert found["database"] == fingerprint_of(other_empty_dsn) != old
    assert found["unreleasedDatabases"] == [old]
    assert "user=" not in str(found) and "password" not in str(found)
    warned = events(served, "PreviousDatabaseUnreachable", "moved")
    assert warned and old in warned[0]["message"]
    assert rows(empty_dsn) == [("moved", True, "default/moved")]  # still there, and said so

    # Once the operator reaches the old database again (here another ClaimSchedule's Secret
    # names it), the row there is released (disabled, no owner), as a delete would.
    core.create_namespaced_secret("default", secret("archive-db", empty_dsn))
    create(api, claimschedule("archived", "@every 1h", databaseRef={"name": "archive-db"}))
    wait_for(lambda: rows(empty_dsn) == [("archived", True, "default/archived"),
                                         ("moved", False, None)],
             "the row released in the old database", log=operator.log)
    wait_for(lambda: (c := condition(api, "moved", "PreviousDatabaseReleased")) and
             c["status"] == "True", "PreviousDatabaseReleased=True", log=operator.log)
    assert "unreleasedDatabases" not in status(api, "moved")
    assert rows(other_empty_dsn) == [("moved", True, "default/moved")]


def test_a_secret_rotated_to_another_dsn_of_the_same_database_keeps_the_row(
        api: kubernetes.client.CustomObjectsApi, core: kubernetes.client.CoreV1Api,
        operator: Operator, empty_dsn: str) -> None:
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    core.create_namespaced_secret("default", secret("reports-db", empty_dsn))
    operator.start()
    create(api, claimschedule("kept", "@every 1h", databaseRef={"name": "reports-db"}))
    wait_for(lambda: owners(empty_dsn) == {"kept": "default/kept"}, "the row", log=operator.log)
    # A new password looks like this to the operator: another DSN, the same database.
    same = psycopg.conninfo.make_conninfo(empty_dsn, application_name="rotated")
    core.patch_namespaced_secret("reports-db", "default", {
        "data": {"dsn": base64.b64encode(same.encode()).decode()}})
    wait_for(lambda: "Secret default/reports-db changed" in operator.log(), "the rotation seen",
             log=operator.log)
    wait_for(lambda: operator.log().count("job kept synced") >= 2, "synced again",
             log=operator.log)
    assert rows(empty_dsn) == [("kept", True, "default/kept")]


def test_a_delete_releases_the_row_where_the_status_says_it_is(
        api: kubernetes.client.CustomObjectsApi, core: kubernetes.client.CoreV1Api,
        operator: Operator, dsn: str, other_empty_dsn: str) -> None:
    operator.env["CLAIMSCHED_OPERATOR_DATABASE_REFS"] = "true"
    operator.start()
    create(api, claimschedule("leaving", "@every 1h"))
    wait_for(lambda: status(api, "leaving").get("database"), "status.database", log=operator.log)
    assert rows(dsn) == [("leaving", True, "default/leaving")]

    # While no operator runs, the resource is pointed at another database, then deleted: its
    # spec names a database its row never reached, its status the one the row is in.
    operator.kill()
    core.create_namespaced_secret("default", secret("reports-db", other_empty_dsn))
    patch(api, "leaving", {"spec": {"databaseRef": {"name": "reports-db"}}})
    delete(api, "leaving")
    operator.start()
    wait_for(lambda: fetch(api, "leaving") is None, "the resource gone", log=operator.log)
    assert rows(dsn) == [("leaving", False, None)]
