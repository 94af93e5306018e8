"""A job has one owner: a code declaration, the CLI, or one ClaimSchedule. Another would-be
owner is refused visibly, and a released job goes back to its code declaration."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import kubernetes
import pytest
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched import Agent, Run
from claimsched.db import Store
from conftest import GROUP, PLURAL, VERSION, Operator, claimschedule, delete, events

TEAM_A, TEAM_B = "team-a", "team-b"


def row(store: Store, job: str) -> tuple[object, ...] | None:
    with store.connection() as conn:
        return conn.execute("SELECT schedule, enabled, source, owner FROM job_schedule"
                            " WHERE job_name = %s", [job]).fetchone()


def ready(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str
          ) -> dict[str, object] | None:
    obj = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    found = [c for c in (obj.get("status") or {}).get("conditions") or []
             if c["type"] == "Ready"]
    return found[0] if found else None


@pytest.fixture
def agent(dsn: str) -> Iterator[Agent]:
    made = Agent(dsn, agent_id="app-1", housekeeping_seconds=0.3, shutdown_grace_seconds=2)

    @made.job("nightly", schedule="@every 1h")
    def nightly(run: Run) -> None:
        pass

    yield made
    made.stop()


def test_a_claimschedule_never_takes_a_code_declared_job_and_a_released_job_goes_back(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store, agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    operator.start()
    # Team A's ClaimSchedule comes first and owns the job; the app's declaration yields, and
    # its agent says who overrides it.
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL,
                                        claimschedule("nightly", "@every 1s"))
    wait_for(lambda: row(store, "nightly") == ("@every 1s", True, "operator", "team-a/nightly"),
             "team A's row", log=operator.log)
    with caplog.at_level(logging.WARNING, logger="claimsched"):
        agent.start()
        assert "job nightly: its declaration in code is overridden by ClaimSchedule " \
               "team-a/nightly" in caplog.text
        assert row(store, "nightly") == ("@every 1s", True, "operator", "team-a/nightly")

        # Deleting it releases the job, and the running agent's declaration takes it back.
        delete(api, "nightly", TEAM_A)
        wait_for(lambda: row(store, "nightly") == ("@every 1h", True, "code", None),
                 "the code declaration's row again", log=operator.log)

    # Team B's ClaimSchedule of the same name is refused, visibly: Ready=False Conflict and an
    # Event naming the owner; the row is untouched.
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL,
                                        claimschedule("nightly", "@every 1s"))
    refused = wait_for(lambda: (c := ready(api, TEAM_B, "nightly")) and c["status"] == "False"
                       and c, "Ready=False on team B's ClaimSchedule", log=operator.log)
    assert refused["reason"] == "Conflict"
    assert "belongs to a code declaration" in str(refused["message"])
    conflicts = wait_for(lambda: events(served, "Conflict", "nightly"), "a Conflict Event")
    assert "job 'nightly' belongs to a code declaration" in conflicts[0]["message"]
    assert conflicts[0]["type"] == "Warning"
    assert row(store, "nightly") == ("@every 1h", True, "code", None)

    # Deleting the refused one releases nothing that is not its own.
    delete(api, "nightly", TEAM_B)
    wait_for(lambda: api.list_namespaced_custom_object(GROUP, VERSION, TEAM_B, PLURAL)["items"]
             == [], "team B's ClaimSchedule gone", log=operator.log)
    assert row(store, "nightly") == ("@every 1h", True, "code", None)


def test_an_agent_takes_back_at_start_a_job_released_while_it_was_down(
        api: kubernetes.client.CustomObjectsApi, operator: Operator, store: Store,
        agent: Agent) -> None:
    operator.start()
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL,
                                        claimschedule("nightly", "@every 1s"))
    wait_for(lambda: row(store, "nightly") == ("@every 1s", True, "operator", "team-a/nightly"),
             "team A's row", log=operator.log)
    delete(api, "nightly", TEAM_A)
    wait_for(lambda: row(store, "nightly") == ("@every 1s", False, "operator", None),
             "the released row", log=operator.log)
    agent.start()
    assert row(store, "nightly") == ("@every 1h", True, "code", None)


def test_a_delete_while_the_operator_is_down_releases_the_row_after_its_restart(
        api: kubernetes.client.CustomObjectsApi, operator: Operator, store: Store) -> None:
    operator.start()
    api.create_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL,
                                        claimschedule("hourly", "@every 1h", jobName="tick"))
    wait_for(lambda: row(store, "tick") == ("@every 1h", True, "operator", "team-a/hourly"),
             "the row", log=operator.log)
    operator.kill()
    delete(api, "hourly", TEAM_A)  # the finalizer keeps it, marked for deletion
    assert api.get_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL, "hourly")[
        "metadata"]["deletionTimestamp"]

    operator.start()  # it never saw the resource alive: it has no memory of it
    wait_for(lambda: api.list_namespaced_custom_object(GROUP, VERSION, TEAM_A, PLURAL)["items"]
             == [], "the resource gone", log=operator.log)
    assert row(store, "tick") == ("@every 1h", False, "operator", None)
