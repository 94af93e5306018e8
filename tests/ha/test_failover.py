"""Failover on a real HA cluster (Patroni + etcd, two PG 15 nodes), real agent processes that
know both hosts (`host=a,b target_session_attrs=read-write`), the primary SIGKILLed mid-run.

Synchronous replication: nothing acknowledged is lost, so nothing runs twice and nothing is
missed. Asynchronous with a lagging standby: the agents say `asynchronous` beforehand, log the
timeline change, and a run whose claim did not survive the promotion is lost (`run.lost`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from bench.chaos.harness import replicas
from bench.ha.patroni import PatroniCluster, patroni_cluster

from claimsched.cli import main
from claimsched.db import Store
from tests.helpers.polling import wait_for

from .support import (
    FAST,
    TICK,
    all_done_between,
    assert_exactly_once,
    done_count,
    first_fire_time,
    query,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[PatroniCluster]:
    with patroni_cluster(synchronous=True, strict=True) as started:
        yield started


def _database(cluster: PatroniCluster, name: str) -> str:
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = cluster.dsn(name)
    store = Store(dsn)
    store.admin.migrate()
    store.close()
    return dsn


def _db_now(dsn: str) -> datetime:
    rows = query(dsn, "SELECT date_trunc('second', now())")
    assert rows
    return rows[0][0]  # type: ignore[no-any-return]


def _logged(group, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [name for name, replica in group.running.items() if text in replica.output()]


def test_a_killed_primary_with_synchronous_replication_loses_no_run_and_repeats_none(
    cluster: PatroniCluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    cluster.set_synchronous(True, strict=True)
    dsn = _database(cluster, "sync_app")
    with replicas(dsn, tmp_path, [TICK], **FAST) as group:
        group.start("r0")
        group.start("r1")
        wait_for(lambda: done_count(dsn) >= 4, "runs before the failover", timeout=60)
        wait_for(
            lambda: query(dsn, "SELECT 1 FROM claimsched.job_runs WHERE status = 'running'"),
            "a run in flight",
        )
        start = first_fire_time(dsn)
        end = _db_now(dsn) + timedelta(seconds=5)  # and the occurrences of the outage
        killed_at = time.monotonic()
        old = cluster.kill_leader()
        new = next(name for name in cluster.members if name != old)
        cluster.wait_leader(new, timeout=60)
        promoted = time.monotonic() - killed_at
        # strict synchronous mode: commits wait until a standby is back; bring the old one back
        cluster.rejoin(old)
        wait_for(
            lambda: all_done_between(dsn, start, end),
            "every occurrence up to 5 s after the kill done",
            timeout=90,
            log=group.dump,
        )
        recovered = time.monotonic() - killed_at
        group.stop_all()
        assert_exactly_once(group, start, end)
        assert _logged(group, "database failover"), group.dump()
    print(
        f"\nsync failover: promoted {promoted:.1f}s, all caught up {recovered:.1f}s after the "
        f"kill; test {time.monotonic() - began:.1f}s"
    )


def test_asynchronous_replication_is_shown_and_a_claim_lost_in_failover_loses_its_run(
    cluster: PatroniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    cluster.set_synchronous(False)
    dsn = _database(cluster, "async_app")
    long_job = {
        "name": "long",
        "kind": "chaos",
        "schedule": "@yearly",
        "sleep": 300,
        "after": "long-effect",
        "lease_seconds": 90,
        "heartbeat_seconds": 2,
    }
    with replicas(dsn, tmp_path, [TICK, long_job], **FAST) as group:
        group.start("r0")
        group.start("r1")
        wait_for(lambda: done_count(dsn) >= 2, "runs before the failover", timeout=60)
        # what every agent reports, read as an operator would
        wait_for(
            lambda: (
                query(dsn, "SELECT DISTINCT durability FROM claimsched.agents")
                == [("asynchronous",)]
            ),
            "the agents to report asynchronous durability",
        )
        assert main(["agents", "--dsn", dsn, "--json"]) == 0
        shown = {row["durability"] for row in json.loads(capsys.readouterr().out)}
        assert shown == {"asynchronous"}
        # the standby falls behind: what is committed from now on exists on the primary only
        cluster.hold_replication()
        store = Store(dsn)
        store.listings.request_runs("long", [store.db_now()], "manual")
        store.close()
        owner = wait_for(
            lambda: query(
                dsn,
                "SELECT claimed_by FROM claimsched.job_runs "
                "WHERE job_name = 'long' AND status = 'running'",
            ),
            "the long run to start",
        )[0][0]
        wait_for(
            lambda: query(dsn, "SELECT 1 FROM public.starts WHERE job = 'long'"),
            "the long handler to be working",
        )
        killed_at = time.monotonic()
        old = cluster.kill_leader()
        new = next(name for name in cluster.members if name != old)
        cluster.wait_leader(new, timeout=60)
        promoted = time.monotonic() - killed_at
        # the new primary never heard of the long run: its owner notices the new timeline,
        # re-reads its runs in flight and loses this one, long before its 90 s lease ends
        replica = group.running[owner]
        wait_for(
            lambda: (
                "database failover" in replica.output()
                and "another replica owns it now, or it was fenced out" in replica.output()
            ),
            "the owner to log the failover and lose the run",
            timeout=45,
            log=group.dump,
        )
        noticed = time.monotonic() - killed_at
        assert query(dsn, "SELECT count(*) FROM claimsched.job_runs WHERE job_name = 'long'") == [
            (0,)
        ]
        assert "timeline" in replica.output()
        group.stop_all()
        assert not group.query("SELECT 1 FROM public.ledger WHERE job = 'long'")
    cluster.release_replication()
    print(
        f"\nasync failover: promoted {promoted:.1f}s, run lost {noticed:.1f}s after the kill; "
        f"test {time.monotonic() - began:.1f}s"
    )
