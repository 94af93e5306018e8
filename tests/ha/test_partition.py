"""A network partition of a run's owner, longer than its lease: real agent processes, one of
them reaching the database through a proxy that black-holes its traffic (no reset, no error:
calls just hang, as behind a cut cable)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from bench.chaos.harness import SLOW, replicas, store
from bench.ha.blackhole import Blackhole
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.helpers.polling import wait_for

from .support import FAST

pytestmark = pytest.mark.slow

LEASE = 4
HEARTBEAT = 1


def test_a_partitioned_owner_loses_its_run_at_the_lease_end_and_its_late_effect_is_refused(
    dsn: str, tmp_path: Path
) -> None:
    jobs = [{**SLOW, "sleep": 6, "lease_seconds": LEASE, "heartbeat_seconds": HEARTBEAT}]
    began = time.monotonic()
    with (
        Blackhole(int(conninfo_to_dict(dsn)["port"])) as proxy,
        replicas(dsn, tmp_path, jobs, **FAST) as group,
    ):
        cut_off = group.start("cut", CLAIMSCHED_DSN=make_conninfo(dsn, port=str(proxy.port)))
        wait_for(lambda: group.query("SELECT 1 FROM claimsched.agents"), "the first agent")
        s = store(dsn)
        s.listings.request_runs("slow", [s.db_now()], "manual")
        s.close()
        wait_for(
            lambda: group.query("SELECT 1 FROM public.ledger WHERE entity = 'first-half'"),
            "the owner's first effect",
        )
        group.start("peer")
        wait_for(
            lambda: len(group.query("SELECT 1 FROM claimsched.agents")) == 2, "the second agent"
        )
        proxy.blackhole()
        partitioned = time.monotonic()
        wait_for(
            lambda: "its lease ran out before a renewal was confirmed" in cut_off.output(),
            "the partitioned owner to lose its run by its own clock",
            timeout=LEASE + HEARTBEAT + 5,
            interval=0.02,
            log=group.dump,
        )
        lost_after = time.monotonic() - partitioned
        # its last renewal was confirmed before the partition, so its lease ended by then
        assert lost_after <= LEASE + HEARTBEAT, lost_after
        wait_for(
            lambda: group.query("SELECT 1 FROM claimsched.job_runs WHERE status = 'done'"),
            "the peer to finish the run",
            timeout=30,
            log=group.dump,
        )
        proxy.restore()  # what the partitioned owner sent meanwhile arrives now
        wait_for(
            lambda: "completion refused" in cut_off.output(),
            "the partitioned owner's late completion to be refused",
            timeout=30,
            log=group.dump,
        )
        assert "LeaseLost" in cut_off.output()  # its late effect, refused
        ((status, attempt, owner),) = group.query(
            "SELECT status, attempt, claimed_by FROM claimsched.job_runs"
        )
        assert (status, attempt, owner) == ("done", 2, "peer")
        effects = sorted(group.query("SELECT entity, agent, attempt FROM public.ledger"))
        assert effects == [("first-half", "cut", 1), ("second-half", "peer", 2)]
    took = time.monotonic() - began
    print(f"\npartition: run lost {lost_after:.2f}s after the cut; test {took:.1f}s")
