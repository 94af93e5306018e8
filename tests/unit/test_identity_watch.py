"""Which database the store reaches: a new timeline or system is a failover, durability alone
is not; each change is logged once."""

from __future__ import annotations

import logging

import pytest

from claimsched import metrics
from claimsched.db.identity import IdentityWatch
from claimsched.records import DatabaseIdentity

SYNC = DatabaseIdentity("7001", 1, "synchronous")


def _watch() -> tuple[IdentityWatch, list[tuple[DatabaseIdentity, DatabaseIdentity]]]:
    watch = IdentityWatch()
    failovers: list[tuple[DatabaseIdentity, DatabaseIdentity]] = []
    watch.on_failover(lambda before, now: failovers.append((before, now)))
    return watch, failovers


def test_a_new_timeline_or_system_is_a_failover_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch, failovers = _watch()
    with caplog.at_level(logging.INFO, "claimsched.store"):
        watch.observe(SYNC)
        watch.observe(SYNC)
        promoted = DatabaseIdentity("7001", 2, "synchronous")
        watch.observe(promoted)
        restored = DatabaseIdentity("8002", 1, "standalone")
        watch.observe(restored)
    assert failovers == [(SYNC, promoted), (promoted, restored)]
    assert [r.action for r in caplog.records] == ["db_identity", "failover", "failover"]  # type: ignore[attr-defined]
    assert "timeline 1" in caplog.records[1].message and "timeline 2" in caplog.records[1].message


def test_a_durability_change_is_logged_and_shown_but_is_no_failover(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch, failovers = _watch()
    shown: list[str] = []
    watch.on_identity(lambda found: shown.append(found.durability))
    with caplog.at_level(logging.INFO, "claimsched.store"):
        watch.observe(SYNC)
        watch.observe(DatabaseIdentity("7001", 1, "asynchronous"))
        watch.observe(None)  # before migrations: nothing known, nothing changes
    assert failovers == [] and shown == ["synchronous", "asynchronous"]
    assert "from synchronous to asynchronous" in caplog.records[-1].message
    assert watch.current == DatabaseIdentity("7001", 1, "asynchronous")


def test_the_durability_metric_is_one_for_the_current_durability_only() -> None:
    metrics.show_durability("asynchronous")
    values = metrics.DURABILITY._values  # before serve(): the stand-in keeps the last values
    assert values == {("synchronous",): 0.0, ("asynchronous",): 1.0, ("standalone",): 0.0}
