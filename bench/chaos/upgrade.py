"""The rolling-upgrade fault: a storm that draws it begins on the previous release (its migrate,
its agents: bench/releases.py), and its first fault is the upgrade. This release's migrate runs
under the claiming agents, then each replica in turn is stopped (SIGTERM, as a Deployment's
rollout stops a pod) and started again as this release's agent.

It holds every lane, the database's too, from its start until the last replica is rolled, and
no other fault starts before it ends: the storm checks this release's guarantees (a fenced-out
run given back, a wall-clock step followed, an orphan reclaimed a lease after its owner's last
renewal), which the previous release's agents do not all keep, so no other fault meets them.
Maintenance (this release's, the operator's) waits for the migrate. The attempts the previous
release superseded have no history (job_attempts came with this release), nor have those its
statements that began before the migrate committed superseded: the checks of the history begin
after the last of them (`history_from`, a position in the audit trail).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Protocol

from claimsched.db import Store
from claimsched.version import __version__

from .faults import GRACE, Event, Fault, Lanes, Slot

ROLLING_UPGRADE = "rolling_upgrade"
# Planned seconds: this release's migrate under the old agents, and one replica's roll (the grace
# of its SIGTERM, then a start). The storm starts no other fault before the upgrade has really
# ended, however long it took (storm.ChaosRun._storm).
MIGRATE_SECONDS, STEP_SECONDS = 1.0, GRACE + 1.5
START_WAIT = 30.0  # seconds a new replica may take to start before the fault gives up on it
# What an agent logs when the database refused it a statement or answered with an error: an
# agent of the previous release must log none of it through the migrate and the rollout.
SQL_TROUBLE = re.compile(r" (ERROR|CRITICAL) |database (error|unavailable)|does not exist|"
                         r"cached plan|permission denied")


def plan_upgrade(replicas: int) -> tuple[float, float]:
    """(duration, slack) of the fault: the migrate, then each replica stopped and started."""
    return MIGRATE_SECONDS + replicas * STEP_SECONDS, 1.0


class Rollout(Protocol):
    """What the rolling upgrade uses of a running storm (storm.ChaosRun)."""

    dsn: str
    slots: dict[str, Slot]
    lanes: Lanes
    migrated: threading.Event  # set once the schema is this release's
    history_from: int  # the audit trail's position from which superseded attempts are kept

    def now(self) -> float: ...

    def query(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]: ...

    def started(self, slot: Slot) -> bool: ...

    def launch(self, slot: Slot) -> None: ...

    def bring_down(self, slot: Slot, graceful: bool, event: Event) -> None: ...

    def violation(self, text: str) -> None: ...


def roll(fleet: Rollout, fault: Fault, event: Event) -> None:
    """This release's migrate, then every replica replaced by this release's agent in turn."""
    began = time.monotonic()
    store = Store(fleet.dsn)
    try:
        store.admin.migrate()
    finally:
        store.close()
    fleet.history_from = _history_from(fleet)
    fleet.migrated.set()
    migrated = time.monotonic() - began
    for lane in sorted(fleet.slots):
        with fleet.lanes.holding(lane) as slot:
            fleet.bring_down(slot, True, Event(fleet.now(), fault.kind, slot.agent_id))
            assert slot.replica is not None
            trouble = [line for line in slot.replica.output().splitlines()
                       if SQL_TROUBLE.search(line)]
            if trouble:
                fleet.violation(f"{slot.agent_id} of the previous release had trouble with the "
                                "database through the upgrade:\n" + "\n".join(trouble[:5]))
            slot.release = None
            fleet.launch(slot)
            deadline = time.monotonic() + START_WAIT
            while not fleet.started(slot) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not fleet.started(slot):
                fleet.violation(f"{slot.agent_id} of claimsched {__version__} did not start "
                                f"within {START_WAIT:g}s of its rollout")
    event.detail = (f"migrated in {migrated:.2f}s under the previous release's agents, then "
                    f"{len(fleet.slots)} replicas rolled to {__version__} one at a time in "
                    f"{time.monotonic() - began - migrated:.1f}s")


def _history_from(fleet: Rollout) -> int:
    """The audit trail's last position once every statement that began before the migrate
    committed has ended (a reclaim that waited for the migrate's locks runs the function it
    began with, the previous release's)."""
    ((committed,),) = fleet.query("SELECT clock_timestamp()")
    deadline = time.monotonic() + START_WAIT
    while fleet.query(
        "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'client backend'"
        " AND state = 'active' AND query_start < %s AND pid <> pg_backend_pid()", [committed]
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    ((position,),) = fleet.query("SELECT coalesce(max(seq), 0) FROM public.run_audit")
    return int(position)
