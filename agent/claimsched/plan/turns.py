"""Whose turn an occurrence is first: one of the replicas that have the same jobs, by a hash.

The replicas of one deployment (agents whose presence rows list the same jobs: their peers, as
housekeeping reads them) agree on a first claimer for every occurrence, `peers[crc32(job, fire
time) % len(peers)]`. It proposes the occurrence at its instant; every other peer only a
hand-off later (`handoff_seconds`, HANDOFF by default), and only if the occurrence is still
unclaimed then (its first claimer is busy, gone, or does not know of them yet). So work spreads
over the replicas by a hash rather than by who wakes first, and replicas do not race for each
occurrence at its instant.

This is an order of proposals, not a lock: the database still decides every race. Views of the
peers that differ (an agent joined or left since the last housekeeping) mean two first claimers,
or an occurrence that waits for its hand-off; a late occurrence (past the hand-off) is anyone's.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import timedelta

HANDOFF = timedelta(seconds=0.25)


@dataclass
class Turns:
    """This agent's id and its peers (sorted, itself among them; set by housekeeping, from
    another thread: one assignment). With no peers known, or no hand-off, every occurrence is
    its turn (replicas then race for each, spread by a jitter only)."""

    me: str
    peers: tuple[str, ...] = ()
    handoff: timedelta = HANDOFF

    @property
    def shared(self) -> bool:
        """Whether other replicas share the jobs (turns then order the proposals)."""
        return len(self.peers) > 1 and self.handoff > timedelta(0)

    def seen(self, peers: tuple[str, ...]) -> None:
        """The peers as housekeeping read them now."""
        self.peers = peers

    def first(self, job_name: str, fire_micros: int) -> bool:
        """Whether this agent is the occurrence's first claimer."""
        peers = self.peers
        if len(peers) < 2:
            return True
        key = f"{job_name} {fire_micros}".encode()
        return peers[zlib.crc32(key) % len(peers)] == self.me
