"""Prometheus metrics of the agent (served only when a metrics port is configured).

Only serve() imports prometheus_client: an agent without a metrics port never pays its memory.
Until then each metric is a light stand-in with the same API (`labels(...)`, `inc()`,
`observe()`). Counters keep their totals, which serve() hands to the real prometheus_client
metrics it creates; histograms observe nothing before serve() (runs start after it).
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any, Protocol

from .errors import ConfigurationError

_LOCK = threading.Lock()  # guards the stand-ins' totals and their hand-over to real metrics
_ALL: list[_Metric] = []


class Incrementable(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class Observable(Protocol):
    def observe(self, amount: float) -> None: ...


class _Metric:
    """A stand-in: keeps one value per label key (combined by `_keep`) until serve() makes the
    real metric (`_create`) and hands each kept value to its child (`_hand`)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self._real: Any = None  # the prometheus_client metric, once serve() made it
        self._kept: dict[tuple[str, ...], float] = {}
        _ALL.append(self)

    def _key(self, values: tuple[object, ...], named: dict[str, object]) -> tuple[str, ...]:
        if named and not values and set(named) == set(self.labelnames):
            values = tuple(named[label] for label in self.labelnames)
        elif named or len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes the labels ({', '.join(self.labelnames)})")
        return tuple(str(value) for value in values)

    def _record(self, key: tuple[str, ...], value: float) -> None:
        """Keep `value` until serve(), or hand it to the real metric's child at once."""
        if self._real is None:
            with _LOCK:
                if self._real is None:
                    self._kept[key] = self._keep(self._kept.get(key), value)
                    return
        self._hand(self._child(self._real, key), value)

    def _bind(self) -> None:
        real = self._create()
        for key, value in self._kept.items():
            self._hand(self._child(real, key), value)
        self._kept.clear()
        self._real = real

    @staticmethod
    def _child(real: Any, key: tuple[str, ...]) -> Any:
        return real.labels(*key) if key else real

    def _create(self) -> Any:
        raise NotImplementedError

    def _keep(self, kept: float | None, value: float) -> float:
        return value

    def _hand(self, child: Any, value: float) -> None:
        raise NotImplementedError


class Counter(_Metric):
    """A prometheus_client.Counter that counts in memory until serve()."""

    def labels(self, *values: object, **named: object) -> Incrementable:
        key = self._key(values, named)
        if self._real is None:
            return _Count(self, key)
        child: Incrementable = self._real.labels(*key)
        return child

    def inc(self, amount: float = 1) -> None:
        self._add(self._key((), {}), amount)

    def _add(self, key: tuple[str, ...], amount: float) -> None:
        if amount < 0:
            raise ValueError(f"{self.name} can only be incremented by non-negative amounts")
        self._record(key, amount)

    def _create(self) -> Any:
        from prometheus_client import Counter as Real

        return Real(self.name, self.documentation, self.labelnames)

    def _keep(self, kept: float | None, value: float) -> float:
        return (kept or 0.0) + value

    def _hand(self, child: Any, value: float) -> None:
        child.inc(value)


class _Count:
    def __init__(self, counter: Counter, key: tuple[str, ...]) -> None:
        self._counter = counter
        self._key = key

    def inc(self, amount: float = 1) -> None:
        self._counter._add(self._key, amount)


class Histogram(_Metric):
    """A prometheus_client.Histogram; what it observes before serve() is not kept."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...] = (),
        *,
        buckets: tuple[float, ...],
    ) -> None:
        super().__init__(name, documentation, labelnames)
        self.buckets = buckets

    def labels(self, *values: object, **named: object) -> Observable:
        key = self._key(values, named)
        if self._real is None:
            return _NOT_SERVED
        child: Observable = self._real.labels(*key)
        return child

    def _create(self) -> Any:
        from prometheus_client import Histogram as Real

        return Real(self.name, self.documentation, self.labelnames, buckets=self.buckets)


class Gauge(_Metric):
    """A prometheus_client.Gauge whose last values are kept until serve()."""

    def set_labels(self, value: float, *labels: object) -> None:
        self._record(self._key(labels, {}), value)

    def value(self, *labels: object) -> float | None:
        """The value last set for these labels (served or not), None if never set."""
        key = self._key(labels, {})
        if self._real is None:
            return self._kept.get(key)
        found = {tuple(s.labels.get(n, "") for n in self.labelnames): s.value
                 for family in self._real.collect() for s in family.samples
                 if s.name == self.name}
        return found.get(key)

    def _create(self) -> Any:
        from prometheus_client import Gauge as Real

        return Real(self.name, self.documentation, self.labelnames)

    def _hand(self, child: Any, value: float) -> None:
        child.set(value)


class _NotServed:
    def observe(self, amount: float) -> None:
        pass


_NOT_SERVED = _NotServed()

CLAIMS = Counter(
    "claimsched_claims",
    "Claim outcomes of due occurrences (won, skipped, no capacity, ...), races lost aside",
    ("job", "outcome"),
)
# A race lost is the usual outcome for all replicas but one: per job, its series would be one per
# job and replica (100,000 jobs: megabytes per agent, and as many series to scrape).
CLAIMS_LOST = Counter(
    "claimsched_claims_lost",
    "Occurrences another replica claimed first (taken) or was claiming (contended)",
)
RUNS = Counter("claimsched_runs", "Finished runs by status", ("job", "status"))
FIRE_TO_START = Histogram(
    "claimsched_fire_to_start_seconds",
    "Delay from an occurrence's fire time to its start",
    ("job",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
RUN_DURATION = Histogram(
    "claimsched_run_duration_seconds",
    "How long a handler ran, by how it ended (done or failed), seconds",
    ("job", "status"),
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200),
)
LEASE_RENEWALS = Counter("claimsched_lease_renewals", "Leases renewed by heartbeats")
LEASES_LOST = Counter("claimsched_leases_lost", "Leases found lost (fenced out)", ("job",))
RECLAIMS = Counter("claimsched_reclaims", "Runs taken over (orphans, retries, requests)", ("job",))
ORPHANS_REAPED = Counter("claimsched_orphans_reaped", "Expired leases turned into orphans")
CATCH_UP = Counter("claimsched_catch_up_runs", "Occurrences claimed late (catch-up)", ("job",))
COMPLETIONS_REFUSED = Counter(
    "claimsched_completions_refused", "Completions refused because the lease was lost", ("job",)
)

DURABILITY = Gauge(
    "claimsched_database_durability",
    "1 for how durable a commit is on the database now (synchronous, asynchronous, standalone)",
    ("durability",),
)
DURABILITIES = ("synchronous", "asynchronous", "standalone")


def show_durability(durability: str) -> None:
    """The durability gauge: 1 for `durability`, 0 for the others."""
    for name in DURABILITIES:
        DURABILITY.set_labels(1.0 if name == durability else 0.0, name)


def require() -> None:
    """Fail clearly, before anything starts, when metrics are asked for but not installed."""
    if importlib.util.find_spec("prometheus_client") is None:
        raise ConfigurationError(
            "metrics need prometheus_client, which is not installed: "
            "pip install 'claimsched[metrics]' (or unset CLAIMSCHED_METRICS_PORT)"
        )


def serve(port: int) -> None:
    """Serve /metrics on this port (0 picks a free one), turning the stand-ins into real metrics."""
    require()
    from prometheus_client import start_http_server

    with _LOCK:
        for metric in _ALL:
            if metric._real is None:
                metric._bind()
    start_http_server(port)
