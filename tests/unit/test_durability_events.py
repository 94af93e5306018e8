"""The operator shows a database's durability in each ClaimSchedule's status and says once, in a
Warning Event, when it is asynchronous (a failover can run an occurrence again)."""

from __future__ import annotations

from datetime import UTC, datetime

from claimsched.schedule.schedules import Schedule
from claimsched_operator.events import transitions
from claimsched_operator.observations import OccurrenceCounter, observe
from tests.unit.test_status_cache import row

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _observed(durability: str):  # type: ignore[no-untyped-def]
    return observe(row(NOW, durability=durability), Schedule("0 * * * *"), OccurrenceCounter())


def test_asynchronous_replication_is_in_the_status_and_warned_about_once() -> None:
    observed = _observed("asynchronous")
    status = observed.status.model_dump(by_alias=True, exclude_none=True)
    assert status["durability"] == "asynchronous"
    (event,) = transitions("job", {}, observed, None, True)
    assert (event.type, event.reason) == ("Warning", "AsynchronousReplication")
    assert "synchronous replication" in event.message
    assert transitions("job", status, _observed("asynchronous"), observed, True) == []


def test_synchronous_and_standalone_databases_are_shown_without_a_warning() -> None:
    for durability in ("synchronous", "standalone"):
        observed = _observed(durability)
        assert observed.status.durability == durability
        assert transitions("job", {}, observed, None, True) == []


def test_live_agents_on_different_time_zone_databases_are_warned_about_once() -> None:
    """Issue 16, item 6: two tzdata versions can put one local time at two instants."""
    def observed(versions: list[str]):  # type: ignore[no-untyped-def]
        return observe(row(NOW, agent_tzdata=versions), Schedule("0 * * * *"),
                       OccurrenceCounter())

    agreeing = observed(["2025b"])
    assert agreeing.status.tzdata_versions == ["2025b"]
    assert transitions("job", {}, agreeing, None, True) == []
    split = observed(["2025b", "2026f"])
    shown = split.status.model_dump(by_alias=True, exclude_none=True)
    assert shown["tzdataVersions"] == ["2025b", "2026f"]
    (event,) = transitions("job", {"tzdataVersions": ["2025b"]}, split, agreeing, True)
    assert (event.type, event.reason) == ("Warning", "TzdataMismatch")
    assert "2025b, 2026f" in event.message
    assert transitions("job", shown, observed(["2025b", "2026f"]), split, True) == []
