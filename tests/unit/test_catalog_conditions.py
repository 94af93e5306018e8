"""The handlers and the status timer write one conditions list, concurrently: neither undoes
what the other just set, even when the body it was handed predates the other's patch."""

from __future__ import annotations

import pytest

from claimsched_operator import catalog
from claimsched_operator.catalog import Catalog
from claimsched_operator.conditions import condition, status_of

OWNER = "default/nightly"


def test_the_timer_on_a_stale_body_keeps_the_synced_condition_a_handler_just_set() -> None:
    known = Catalog()
    stale: list[dict[str, object]] = []  # the body both were handed: no conditions yet
    by_handler = known.merge_conditions(OWNER, stale, [condition("Synced", True, "Synced")], 1)
    assert by_handler is not None and status_of(by_handler, "Synced") == "True"
    by_timer = known.merge_conditions(
        OWNER, stale, [condition("AgentsAvailable", True, "AgentsAvailable")], 1)
    assert by_timer is not None
    assert (status_of(by_timer, "Synced"), status_of(by_timer, "AgentsAvailable")) == (
        "True", "True")
    assert status_of(known.conditions(OWNER, stale), "Synced") == "True"
    # nothing to patch once the body shows it
    assert known.merge_conditions(
        OWNER, by_timer, [condition("AgentsAvailable", True, "AgentsAvailable")], 1) is None


def test_the_body_counts_again_once_the_memory_is_old_and_after_a_delete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    known = Catalog()
    known.merge_conditions(OWNER, None, [condition("Synced", True, "Synced")], 1)
    written_elsewhere = [{"type": "Synced", "status": "False", "reason": "InvalidSpec"}]
    monkeypatch.setattr(catalog, "CONDITIONS_MEMORY_SECONDS", -1.0)
    assert known.conditions(OWNER, written_elsewhere) == written_elsewhere
    monkeypatch.undo()
    known.merge_conditions(OWNER, None, [condition("Synced", True, "Synced")], 1)
    known.drop(OWNER)
    assert known.conditions(OWNER, written_elsewhere) == written_elsewhere
