"""The running operator's endpoints: /healthz, /readyz (the default database) and /metrics,
with the per-ClaimSchedule gauges that the Helm chart's alerts use, and the alert Events."""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import kubernetes
import psycopg
from bench.chaos.harness import replicas
from tests.helpers.kube_emulator import Served
from tests.helpers.polling import wait_for

from conftest import Operator, claimschedule, create, delete, events, sample, status

PER_SCHEDULE = ("claimsched_operator_missed_runs", "claimsched_operator_failed_runs",
                "claimsched_operator_orphaned_runs",
                "claimsched_operator_schedules_without_agents", "claimsched_operator_late",
                "claimsched_operator_consecutive_failures", "claimsched_operator_failing")
FAST = {"leaseSeconds": 5, "heartbeatSeconds": 1, "catchUpWindowSeconds": 1}


def test_probes_follow_the_default_database_and_metrics_report_each_schedule(
        api: kubernetes.client.CustomObjectsApi, operator: Operator, served: Served,
        server_dsn: str, template_db: str, tmp_path: Path) -> None:
    name = f"late_{os.getpid()}_{secrets.token_hex(3)}"
    late_dsn = psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    operator.dsn = late_dsn  # a database that does not exist yet
    operator.serve_metrics = True
    operator.start()
    try:
        assert operator.get("/healthz") == 200
        assert operator.get("/readyz") == 503
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        wait_for(lambda: operator.get("/readyz") == 200, "ready once the database is up",
                 log=operator.log)
        scenario(api, operator, served, late_dsn, tmp_path)
    finally:
        operator.kill()
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def scenario(api: kubernetes.client.CustomObjectsApi, operator: Operator, served: Served,
             dsn: str, tmp_path: Path) -> None:
    # lonely: nobody handles it (missed, no agents, late past its starting deadline); flaky:
    # fails every time (failing from 2 in a row); slow: its only agent is killed mid-run and the
    # run stays orphaned (another agent reaps it, none takes it).
    alerts = {"lonely": {"startingDeadlineSeconds": 1}, "flaky": {"failureThreshold": 2}}
    for job in ("lonely", "flaky", "slow"):
        create(api, claimschedule(job, "@every 2s", **FAST, **alerts.get(job, {})))
    (tmp_path / "slow").mkdir()
    (tmp_path / "flaky").mkdir()
    with replicas(dsn, tmp_path / "slow", [{"name": "slow", "sleep": 30}]) as slow, \
            replicas(dsn, tmp_path / "flaky", [{"name": "flaky", "fail": True}]) as flaky:
        slow.start("a1")
        flaky.start("b1")
        wait_for(lambda: slow.owner_of_running("slow") == "a1", "slow running on a1",
                 log=slow.dump)
        slow.running["a1"].signal(signal.SIGKILL)

        def value(metric: str, job: str) -> float | None:
            return sample(operator.metrics(), metric, namespace="default", claimschedule=job,
                          job_name=job)

        expected = {
            ("claimsched_operator_missed_runs", "lonely"): lambda v: v >= 1,
            ("claimsched_operator_schedules_without_agents", "lonely"): lambda v: v == 1,
            ("claimsched_operator_failed_runs", "flaky"): lambda v: v >= 1,
            ("claimsched_operator_schedules_without_agents", "flaky"): lambda v: v == 0,
            ("claimsched_operator_orphaned_runs", "slow"): lambda v: v == 1,
            ("claimsched_operator_schedules_without_agents", "slow"): lambda v: v == 1,
            ("claimsched_operator_late", "lonely"): lambda v: v == 1,
            ("claimsched_operator_late", "flaky"): lambda v: v == 0,  # its runs start
            ("claimsched_operator_late", "slow"): lambda v: v == 1,  # its only agent is gone
            ("claimsched_operator_consecutive_failures", "flaky"): lambda v: v >= 2,
            ("claimsched_operator_failing", "flaky"): lambda v: v == 1,
            ("claimsched_operator_failing", "slow"): lambda v: v == 0,
        }
        for (metric, job), check in expected.items():
            wait_for(lambda m=metric, j=job, c=check: (v := value(m, j)) is not None and c(v),
                     f"{metric} of {job}", timeout=30,
                     log=lambda: f"{flaky.dump()}\n{operator.metrics()}")
    # The status says the same (it is patched by the next timer run, up to 0.5 s later).
    for job, field, sub, check in (("slow", "orphanedRuns", "current", lambda v: v == 1),
                                   ("flaky", "failedRuns", "last24h", lambda v: v >= 1),
                                   ("lonely", "missedRuns", "last24h", lambda v: v >= 1)):
        wait_for(lambda j=job, f=field, k=sub, c=check: c(status(api, j)[f][k]),
                 f"{field}.{sub} of {job}", log=operator.log)
    wait_for(lambda: status(api, "flaky").get("failing") is True, "flaky failing",
             log=operator.log)
    assert status(api, "flaky")["consecutiveFailures"] >= 2
    wait_for(lambda: status(api, "lonely").get("late") is True, "lonely late", log=operator.log)
    assert status(api, "lonely")["lateFireTime"]
    assert status(api, "slow").get("failing") is False and status(api, "flaky")["late"] is False
    wait_for(lambda: status(api, "slow").get("late") is True, "slow late (its agent is gone)",
             log=operator.log)
    wait_for(lambda: events(served, "FailingRepeatedly", "flaky"), "a FailingRepeatedly Event",
             log=operator.log)
    wait_for(lambda: events(served, "Late", "lonely"), "a Late Event", log=operator.log)
    assert len(events(served, "FailingRepeatedly", "flaky")) == 1, "only on the transition"
    assert not events(served, "Recovered")

    metrics = operator.metrics()
    names = {metric for metric, _ in metrics}
    assert set(PER_SCHEDULE) <= names
    assert {"claimsched_operator_status_refresh_seconds_count",
            "claimsched_operator_schedules_synced_total"} <= names
    assert sample(metrics, "claimsched_operator_schedules", database="default") == 3

    # A deleted ClaimSchedule's series go away.
    delete(api, "lonely")
    wait_for(lambda: not any(("claimschedule", "lonely") in labels
                             for _, labels in operator.metrics()),
             "lonely's series to go", log=operator.log)


def test_a_port_the_operator_cannot_bind_is_one_line_and_an_exit(
        served: Served, dsn: str, tmp_path: Path) -> None:
    """Another server holds the health port (`claimsched web` on 8080 was the old default's
    clash): the operator says which port and which setting, and exits, rather than run on
    without probes, status or metrics."""
    import socket
    import subprocess

    from conftest import OPERATOR

    holder = socket.create_server(("0.0.0.0", 0))
    port = holder.getsockname()[1]
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KUBERNETES_", "CLAIMSCHED_"))}
        env.update({"KUBECONFIG": str(served.kubeconfig), "CLAIMSCHED_DSN": dsn,
                    "CLAIMSCHED_OPERATOR_HEALTH_PORT": str(port),
                    "CLAIMSCHED_OPERATOR_METRICS_PORT": "0"})
        done = subprocess.run([str(OPERATOR)], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, check=False)
    finally:
        holder.close()
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"port {port} (CLAIMSCHED_OPERATOR_HEALTH_PORT) cannot be used" in done.stderr
