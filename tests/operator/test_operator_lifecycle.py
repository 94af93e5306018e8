"""The real operator against the emulator and a real Postgres: sync, status, agents."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

import kubernetes
from bench.chaos.harness import replicas
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from claimsched.db import Store
from conftest import (
    Operator,
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


def rows(store: Store, job: str) -> list[dict[str, object]]:
    with store.connection() as conn:
        cur = conn.execute("SELECT * FROM job_schedule WHERE job_name = %s", [job])
        names = [c.name for c in cur.description or ()]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_created_schedule_is_synced_run_by_agents_and_reported(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store, dsn: str, tmp_path: Path) -> None:
    operator.start()
    create(api, claimschedule("tick", "@every 1s", leaseSeconds=6, heartbeatSeconds=1,
                              catchUpWindowSeconds=2))
    row = wait_for(lambda: rows(store, "tick"), "the job_schedule row", timeout=2,
                   log=operator.log)[0]
    assert (row["source"], row["owner"], row["schedule"]) == ("operator", "default/tick",
                                                              "@every 1s")
    with replicas(dsn, tmp_path, [{"name": "tick", "after": "done"}]) as group:
        group.start("a1")
        s = wait_for(lambda: (st := status(api, "tick")).get("lastSuccessfulTime")
                     and st.get("liveAgents") and st, "a successful run in the status",
                     log=lambda: f"{group.dump()}\n{group.query('TABLE claimsched.agents')}"
                     f"\n{group.query('TABLE claimsched.job_runs')}\n{status(api, 'tick')}")
        assert s["lastRun"]["claimedBy"] == "a1"
        assert s["jobName"] == "tick" and s["observedGeneration"] == 1
        assert len(s["nextFireTimes"]) == 5 and s["nextFireTime"] == s["nextFireTimes"][0]
        assert s["liveAgents"] == 1
        assert s["durability"] == "standalone" and len(s["tzdataVersions"]) == 1
        ready = wait_for(lambda: (c := condition(api, "tick", "Ready")) and
                         c["status"] == "True" and c, "Ready=True", log=operator.log)
        assert ready["reason"] == "Ready"
        assert condition(api, "tick", "Synced")["status"] == "True"  # type: ignore[index]
        assert condition(api, "tick", "AgentsAvailable")["status"] == "True"  # type: ignore[index]
    assert len(events(served, "Synced", "tick")) == 1


def test_a_fleet_that_stopped_or_was_killed_is_reported_unavailable_and_late(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store, dsn: str, tmp_path: Path) -> None:
    """No spec.startingDeadlineSeconds: the default grace applies. One job's agent stops
    (SIGTERM: its presence says stopped), the other's is SIGKILLed (its presence expires)."""
    operator.serve_metrics = True
    operator.start()
    for name in ("stopped", "killed"):
        create(api, claimschedule(name, "@every 2s", leaseSeconds=6, heartbeatSeconds=1))
        wait_for(lambda n=name: rows(store, n), f"{name}'s row", log=operator.log)
    # Presence for 6 s (a sweep every 2 s): a loaded machine's late sweep is no flap of the
    # agents' availability (the NoLiveAgent Events are counted: once each, on the transition).
    slow = {"CLAIMSCHED_HOUSEKEEPING_SECONDS": "2"}
    with replicas(dsn, tmp_path, [{"name": "stopped"}], **slow) as stopping, \
            replicas(dsn, tmp_path, [{"name": "killed"}], **slow) as killing:
        agents = {"stopped": stopping.start("s1"), "killed": killing.start("k1")}
        for name in agents:
            wait_for(lambda n=name: (c := condition(api, n, "AgentsAvailable"))
                     and c["status"] == "True" and status(api, n).get("lastSuccessfulTime"),
                     f"{name} handled and run", log=operator.log)
            assert status(api, name).get("late") is False
        before = {name: len(events(served, "NoLiveAgent", name)) for name in agents}
        agents["stopped"].signal(signal.SIGTERM)
        agents["killed"].signal(signal.SIGKILL)
        for agent in agents.values():
            agent.process.wait(30)

        for name in agents:
            late = wait_for(lambda n=name: (s := status(api, n)).get("late") and s,
                            f"{name} to be late", log=operator.log)
            assert late["liveAgents"] == 0 and late["lateFireTime"]
            available = condition(api, name, "AgentsAvailable")
            assert available is not None and available["status"] == "False"
            assert available["reason"] == "NoLiveAgent"
            ready = condition(api, name, "Ready")
            assert ready is not None and ready["status"] == "False"
            assert ready["reason"] == "NoLiveAgent"
            assert f"late: no run of its occurrences since {late['lateFireTime']}" in \
                ready["message"]
            wait_for(lambda n=name: len(events(served, "NoLiveAgent", n)) > before[n],
                     f"{name}'s NoLiveAgent Event")
            event = wait_for(lambda n=name: events(served, "Late", n), f"{name}'s Late Event")
            assert late["lateFireTime"] in event[0]["message"]
            labels = {"namespace": "default", "claimschedule": name, "job_name": name}
            wait_for(lambda n=labels: (m := operator.metrics())
                     and sample(m, "claimsched_operator_late", **n) == 1
                     and sample(m, "claimsched_operator_schedules_without_agents", **n) == 1,
                     f"{name}'s late and without-agents gauges", log=operator.log)
    assert {name: len(events(served, "NoLiveAgent", name)) - before[name]
            for name in agents} == {"stopped": 1, "killed": 1}, [
        (e.get("eventTime") or e.get("lastTimestamp"), e["involvedObject"]["name"], e["message"])
        for e in events(served, "NoLiveAgent")]
    assert {name: len(events(served, "Late", name)) for name in agents} == {
        "stopped": 1, "killed": 1}


def db_time(store: Store) -> datetime:
    """The database clock now (clock_timestamp: after everything committed so far)."""
    with store.connection() as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def test_killed_agent_orphans_its_run_and_the_operator_reports_it(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store, dsn: str, tmp_path: Path) -> None:
    operator.start()
    create(api, claimschedule("slow", "@every 2s", leaseSeconds=5, heartbeatSeconds=1,
                              catchUpWindowSeconds=1, maxAttempts=3))
    wait_for(lambda: rows(store, "slow"), "the job_schedule row", log=operator.log)
    with replicas(dsn, tmp_path, [{"name": "slow", "sleep": 6, "after": "done"}]) as group:
        for name in ("a1", "a2", "a3"):
            group.start(name)
        owner = wait_for(lambda: group.owner_of_running("slow"), "a running run",
                         log=group.dump)
        before = wait_for(lambda: status(api, "slow").get("orphanedRuns"),
                          "orphanedRuns in the status", log=operator.log)
        assert before == {"current": 0, "last24h": 0}
        group.running[owner].signal(signal.SIGKILL)

        orphaned = wait_for(lambda: (o := status(api, "slow").get("orphanedRuns"))
                            and o["last24h"] >= 1 and o, "orphanedRuns to rise",
                            log=lambda: f"{group.dump()}\n{operator.log()}")
        assert orphaned["last24h"] == 1
        event = wait_for(lambda: events(served, "RunOrphaned", "slow"), "a RunOrphaned Event",
                         log=operator.log)[0]
        assert event["type"] == "Warning" and "lost their lease" in event["message"]
        # Another agent takes the orphan over with the next attempt.
        taken = wait_for(lambda: group.query(
            "SELECT claimed_by, attempt FROM claimsched.job_runs"
            " WHERE job_name = 'slow' AND orphan_count = 1 AND status IN ('running', 'done')"),
            "the orphan to be reclaimed", log=group.dump)
        assert taken[0][0] != owner and taken[0][1] == 2
    assert len(events(served, "RunOrphaned", "slow")) == 1


def test_suspended_schedule_starts_no_runs_and_resumes_without_catch_up(
        served: Served, api: kubernetes.client.CustomObjectsApi, operator: Operator,
        store: Store, dsn: str, tmp_path: Path) -> None:
    operator.start()
    # A long catch-up window with policy All: anything missed while suspended would be run.
    create(api, claimschedule("tick", "@every 1s", leaseSeconds=6, heartbeatSeconds=1,
                              catchUpWindowSeconds=600, catchUpPolicy="All"))
    wait_for(lambda: rows(store, "tick"), "the job_schedule row", log=operator.log)

    def runs(after: datetime | None = None, until: datetime | None = None,
             done: bool = False, started_after: datetime | None = None) -> int:
        """tick's runs with fire_time in (after, until], only done ones, or started later."""
        with store.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM job_runs WHERE job_name = 'tick'"
                " AND (%(after)s::timestamptz IS NULL OR fire_time > %(after)s)"
                " AND (%(until)s::timestamptz IS NULL OR fire_time <= %(until)s)"
                " AND (NOT %(done)s OR status = 'done')"
                " AND (%(started)s::timestamptz IS NULL OR started_at > %(started)s)",
                {"after": after, "until": until, "done": done, "started": started_after},
            ).fetchone()
        return int(row[0]) if row else 0

    with replicas(dsn, tmp_path, [{"name": "tick", "after": "done"}]) as group:
        group.start("a1")
        group.start("a2")
        wait_for(lambda: runs(done=True) >= 2, "runs before suspending",
                 log=group.dump)

        patch(api, "tick", {"spec": {"suspend": True}})
        wait_for(lambda: not rows(store, "tick")[0]["enabled"], "the row to be disabled",
                 log=operator.log)
        disabled = db_time(store)  # every claim from now on sees the row disabled
        wait_for(lambda: (c := condition(api, "tick", "Ready")) and c["reason"] == "Suspended",
                 "Ready: Suspended", log=operator.log)
        time.sleep(3)  # three occurrences fall while suspended, with both agents running
        assert runs(after=disabled) == runs(started_after=disabled) == 0

        patch(api, "tick", {"spec": {"suspend": False}})
        resumed = wait_for(lambda: (r := rows(store, "tick")[0])["enabled"] and r,
                           "the row to be enabled", log=operator.log)["active_since"]
        wait_for(lambda: runs(after=resumed, done=True) >= 2,
                 "runs after resuming", log=group.dump)
        # Nothing of the suspended period was caught up, though the window would allow it.
        assert runs(after=disabled, until=resumed) == 0
        wait_for(lambda: (s := status(api, "tick").get("lastRun")) and
                 datetime.fromisoformat(s["fireTime"].replace("Z", "+00:00")) > resumed,
                 "the status to show a run after resuming", log=operator.log)


LEGACY = "kopf.zalando.org/KopfFinalizerMarker"
OURS = "claimsched.io/finalizer"


def test_claimschedules_with_kopfs_default_finalizer_are_adopted_and_released_on_delete(
        api: kubernetes.client.CustomObjectsApi, operator: Operator, store: Store) -> None:
    """An operator of an earlier release marked ClaimSchedules with kopf's default finalizer.
    This one replaces it with its own; one deleted while only the old marker held it is
    released as a delete releases it (row disabled, owner let go), then let go of."""
    operator.start()
    for name in ("kept", "going"):
        create(api, claimschedule(name, "@every 1h"))
        wait_for(lambda n=name: rows(store, n) and fetch_finalizers(api, n) == [OURS],
                 f"{name}'s row and finalizer", log=operator.log)
    operator.kill()
    for name in ("kept", "going"):  # as the earlier release left them
        patch(api, name, {"metadata": {"finalizers": [LEGACY]}})
    delete(api, "going")  # held by the old marker alone, with no operator to let go
    assert fetch_finalizers(api, "going") == [LEGACY]

    operator.start()
    wait_for(lambda: fetch_finalizers(api, "kept") == [OURS], "kept adopted", log=operator.log)
    wait_for(lambda: fetch(api, "going") is None, "going let go of", log=operator.log)
    (row,) = rows(store, "going")
    assert (row["enabled"], row["owner"]) == (False, None)
    (row,) = rows(store, "kept")
    assert (row["enabled"], row["owner"]) == (True, "default/kept")


def fetch_finalizers(api: kubernetes.client.CustomObjectsApi, name: str) -> list[str] | None:
    found = fetch(api, name)
    return None if found is None else list(found["metadata"].get("finalizers") or [])
