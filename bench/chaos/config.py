"""What a storm is asked for: its seed, size, duration and fault kinds (ChaosConfig)."""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import ALL_KINDS, FAILOVER, FAULT_KINDS, PG_FAULTS, POOLER


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    replicas: int = 5
    jobs: int = 20
    duration: float = 22.0  # seconds of faults; healing and checks come on top
    fault_rate: float = 0.5  # faults per second of `duration`, at least one of each kind
    kinds: tuple[str, ...] = FAULT_KINDS
    max_concurrency: int = 6
    maintenance_every: tuple[float, float] = (2.0, 6.0)  # seconds between concurrent maintains
    lapse_partitions: bool = False  # start with this month's partition missing (see test)
    settle_timeout: float = 60.0  # catch-up and quiescence deadlines, each
    pg_settings: tuple[tuple[str, str], ...] = ()
    ha: bool = False  # a Patroni cluster (synchronous, strict) instead of one server

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(ALL_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}: choose from {', '.join(ALL_KINDS)}")
        if self.ha and set(self.kinds) & set(PG_FAULTS):
            raise ValueError(
                f"{', '.join(PG_FAULTS)} stop the one standalone server: with --ha the database "
                f"fault is {FAILOVER}"
            )
        if not self.ha and FAILOVER in self.kinds:
            raise ValueError(f"{FAILOVER} needs a Patroni cluster: add --ha")
        if POOLER in self.kinds and self.replicas < 2:
            raise ValueError(f"{POOLER} puts the odd replicas behind a pooler: it needs two")
