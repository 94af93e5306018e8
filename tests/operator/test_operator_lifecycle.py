"""The real operator against the emulator and a real Postgres: sync, status, agents."""

from __future__ import annotations

from pathlib import Path

import kubernetes
from tests.chaos.harness import replicas
from tests.helpers.kube_emulator import Served

from claimsched.db import Store
from conftest import Operator, claimschedule, condition, create, events, eventually, status


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
    row = eventually(lambda: rows(store, "tick"), "the job_schedule row", timeout=2,
                     log=operator.log)[0]
    assert (row["source"], row["owner"], row["schedule"]) == ("operator", "default/tick",
                                                              "@every 1s")
    with replicas(dsn, tmp_path, [{"name": "tick", "after": "done"}]) as group:
        group.start("a1")
        s = eventually(lambda: (st := status(api, "tick")).get("lastSuccessfulTime")
                       and st.get("liveAgents") and st, "a successful run in the status",
                       log=lambda: f"{group.dump()}\n{group.query('TABLE claimsched.agents')}"
                       f"\n{group.query('TABLE claimsched.job_runs')}\n{status(api, 'tick')}")
        assert s["lastRun"]["claimedBy"] == "a1"
        assert s["jobName"] == "tick" and s["observedGeneration"] == 1
        assert len(s["nextFireTimes"]) == 5 and s["nextFireTime"] == s["nextFireTimes"][0]
        assert s["liveAgents"] == 1
        ready = eventually(lambda: (c := condition(api, "tick", "Ready")) and
                           c["status"] == "True" and c, "Ready=True", log=operator.log)
        assert ready["reason"] == "Ready"
        assert condition(api, "tick", "Synced")["status"] == "True"  # type: ignore[index]
        assert condition(api, "tick", "AgentsAvailable")["status"] == "True"  # type: ignore[index]
    assert len(events(served, "Synced", "tick")) == 1
