"""Prometheus metrics of the agent (served only when a metrics port is configured)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

CLAIMS = Counter(
    "claimsched_claims",
    "Claim outcomes of due occurrences (won, lost, skipped, ...)",
    ["job", "outcome"],
)
RUNS = Counter("claimsched_runs", "Finished runs by status", ["job", "status"])
FIRE_TO_START = Histogram(
    "claimsched_fire_to_start_seconds",
    "Delay from an occurrence's fire time to its start",
    ["job"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LEASE_RENEWALS = Counter("claimsched_lease_renewals", "Leases renewed by heartbeats")
LEASES_LOST = Counter("claimsched_leases_lost", "Leases found lost (fenced out)", ["job"])
RECLAIMS = Counter("claimsched_reclaims", "Runs taken over (orphans, retries, requests)", ["job"])
ORPHANS_REAPED = Counter("claimsched_orphans_reaped", "Expired leases turned into orphans")
CATCH_UP = Counter("claimsched_catch_up_runs", "Occurrences claimed late (catch-up)", ["job"])
COMPLETIONS_REFUSED = Counter(
    "claimsched_completions_refused", "Completions refused because the lease was lost", ["job"]
)


def serve(port: int) -> None:
    """Serve /metrics on this port (0 picks a free one)."""
    start_http_server(port)
