"""The fault kinds of a storm: their names, the groups a storm draws from, and their weights.

The replica faults, the standalone server's (PG_FAULTS) or the Patroni cluster's (FAILOVER), the
pooler's, a partition, manual runs, a freeze inside once(), the recovery faults (recovery.py)
and the rolling upgrade (upgrade.py, asked for by name only).
"""

from __future__ import annotations

from .recovery import FLEET_DOWN, KILL_BACKFILLER, PAUSE_RECLAIMER, RECOVERY_FAULTS
from .upgrade import ROLLING_UPGRADE

REPLICA_FAULTS = ("sigkill", "sigstop", "sigterm", "new_id")
PG_FAULTS = ("pg_restart", "pg_outage", "long_outage")  # long_outage: longer than every lease
MANUAL_FAULTS = ("trigger", "backfill")  # manual runs of Forbid jobs, as an operator asks them
# The replicas of the odd slots (r1, r3, ...) reach the database through pgbouncer in
# transaction mode (bench/ha/pgbouncer.py; on a Patroni cluster, pointed at the leader and moved
# after each failover, as a role-change callback would); the pooler is killed
# (every connection through it drops, mid-transaction) and started again after a few seconds,
# or paused (the transactions in flight finish, every new one waits) for up to longer than a
# lease, then resumed.
POOLER = "pooler"
# RECOVERY_FAULTS (recovery.py): the owner of a reclaimed run paused past its lease, a backfill's
# worker killed, the whole fleet down for longer than every period
FAULT_KINDS = (
    *REPLICA_FAULTS, *PG_FAULTS, "skew", *MANUAL_FAULTS, "freeze_in_once", *RECOVERY_FAULTS,
    POOLER,
)
# A replica's database connections black-holed (no reset) for longer than every lease; any
# database. The Patroni leader lost (SIGKILL of its Patroni, postmaster and children; the
# synchronous standby is promoted, the dead node rejoins) or switched over: --ha only, where it
# replaces the faults of the one standalone server (PG_FAULTS).
PARTITION, FAILOVER = "partition", "failover"
HA_KINDS = (
    *REPLICA_FAULTS, PARTITION, FAILOVER, "skew", *MANUAL_FAULTS, "freeze_in_once",
    *RECOVERY_FAULTS, POOLER,
)
# The storm begins on the previous release and is upgraded to this one first (upgrade.py):
# asked for by name only, never drawn by default.
ALL_KINDS = (*FAULT_KINDS, PARTITION, FAILOVER, ROLLING_UPGRADE)
DB_FAULTS = (*PG_FAULTS, FAILOVER)  # one at a time on the "postgres" lane
WEIGHTS = {
    "sigkill": 3,
    "sigstop": 3,
    "sigterm": 2,
    "new_id": 1,
    "pg_restart": 1,
    "pg_outage": 1,
    "long_outage": 1,
    "skew": 2,
    "trigger": 2,
    "backfill": 2,
    "freeze_in_once": 1,
    PARTITION: 2,
    POOLER: 1,
    FAILOVER: 0.6,  # each takes the database away for seconds (switchover) or ~30 s (SIGKILL)
    PAUSE_RECLAIMER: 2,
    KILL_BACKFILLER: 1,
    FLEET_DOWN: 0.5,  # every replica's lane at once
}


def default_kinds(ha: bool) -> tuple[str, ...]:
    """What a storm draws unless told: every fault its database allows (partitions are drawn
    only when asked for on a standalone server, so the seeds recorded before them replay)."""
    return HA_KINDS if ha else FAULT_KINDS
