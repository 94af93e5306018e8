"""The demo's faults: SIGKILL a replica mid-run, then SIGSTOP another past its lease, SIGCONT it."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...db import RunRow
from . import app
from .fleet import Fleet
from .observations import Effects, Key, Observations, hms


@dataclass
class Scenario:
    """The faults: SIGKILL a replica mid-run, then SIGSTOP another past its lease, SIGCONT it."""

    fleet: Fleet
    say: Callable[[str], None]
    killed: tuple[str, Key] | None = None
    paused: tuple[str, Key] | None = None
    restarted: str | None = None
    paused_at: float = 0.0
    resumed: bool = False
    reclaimed: dict[Key, tuple[str | None, int]] = field(default_factory=dict)
    refused: bool = False
    refused_before: int = 0  # the paused replica's refusals before it was paused

    @property
    def complete(self) -> bool:
        return bool(self.killed and self.killed[1] in self.reclaimed and self.resumed
                    and self.refused)

    @property
    def phase(self) -> str:
        if self.killed is None:
            return f"waiting for a replica to be mid-way through {app.SETTLE}, to kill it"
        if self.paused is None:
            return f"{self.killed[0]} killed; waiting for a run of {app.SETTLE} to pause"
        if not self.resumed:
            return f"{self.paused[0]} paused; waiting for its lease to expire and a takeover"
        if not self.complete:
            return f"{self.paused[0]} resumed; waiting for its late work to be refused"
        return "the kill and the pause are done: running on to the end"

    def tick(self, runs: list[RunRow], effects: Effects, seen: Observations) -> None:
        rows = {(r.job_name, r.fire_time): r for r in runs}
        for fault in [f for f in (self.killed, self.paused) if f]:
            row = rows.get(fault[1])
            if row and row.attempt > 1 and fault[1] not in self.reclaimed:
                self.reclaimed[fault[1]] = (row.claimed_by, row.attempt)
        busy = {r.claimed_by for r in runs if r.status == "running" and r.attempt > 1}
        slow = [(r.fire_time, r.claimed_by) for r in runs
                if r.job_name == app.SETTLE and r.status == "running" and r.attempt == 1
                and r.claimed_by is not None and self.fleet.up(r.claimed_by)]
        for fire_time, claimer in slow:
            key: Key = (app.SETTLE, fire_time)
            done = {e for e, who, _ in effects.get(key, []) if who == claimer}
            if self.killed is None and done == {app.BATCHES[0]}:
                return self._kill(claimer, key)
            if (self.killed and self.paused is None and key != self.killed[1] and len(done) < 2
                    and claimer not in busy):  # not the one finishing the orphan
                return self._pause(claimer, key)
        if self.paused and not self.resumed and (
            self.paused[1] in self.reclaimed or time.monotonic() - self.paused_at > 30
        ):
            name = self.paused[0]
            self.fleet.replicas[name].signal(signal.SIGCONT)
            self.fleet.replicas[name].state = "running"
            self.resumed = True
            owner = self.reclaimed.get(self.paused[1], ("nobody", 0))
            self.say(f"resumed {name} (SIGCONT) after {time.monotonic() - self.paused_at:.1f}s; "
                     f"{owner[0]} owns its run now (attempt {owner[1]})")
        if self.paused:
            late = sum(v.count(self.paused[0]) for v in (*seen.fenced.values(),
                                                         *seen.refused_effects.values()))
            self.refused = self.resumed and late > self.refused_before
            self.refused_before = late if not self.resumed else self.refused_before

    def _kill(self, name: str, key: Key) -> None:
        replica = self.fleet.replicas[name]
        replica.signal(signal.SIGKILL)
        replica.state = "killed"
        self.killed = (name, key)
        self.say(f"killed {name} (SIGKILL, pid {replica.process.pid}) in the middle of "
                 f"{key[0]} @ {hms(key[1])}: after {app.BATCHES[0]}, before {app.BATCHES[1]}")
        self.restarted = f"r{len(self.fleet.replicas) + 1}"
        started = self.fleet.start(self.restarted)
        self.say(f"started {self.restarted} (pid {started.process.pid}) in its place, "
                 f"as an orchestrator would")

    def _pause(self, name: str, key: Key) -> None:
        self.fleet.replicas[name].signal(signal.SIGSTOP)
        self.fleet.replicas[name].state = "paused"
        self.paused, self.paused_at = (name, key), time.monotonic()
        self.say(f"paused {name} (SIGSTOP) while it runs {key[0]} @ {hms(key[1])}; "
                 f"its lease ({app.LEASE_SECONDS}s) will run out")
