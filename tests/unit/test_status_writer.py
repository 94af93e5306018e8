"""One writer of a ClaimSchedule's status. The handlers and the status timer write one conditions
list, concurrently: neither undoes what the other just set, even when the body it was handed
predates the other's patch."""

from __future__ import annotations

import re
from pathlib import Path

import kopf
import pytest
import yaml

from claimsched_operator import writer
from claimsched_operator.conditions import condition, status_of
from claimsched_operator.models import FailedRuns, MissedRuns, ObservedStatus, OrphanedRuns
from claimsched_operator.writer import Writer, Written

OWNER = "default/nightly"


def test_the_timer_on_a_stale_body_keeps_the_synced_condition_a_handler_just_set() -> None:
    known = Written()
    stale: list[dict[str, object]] = []  # the body both were handed: no conditions yet
    by_handler = known.merge(OWNER, stale, [condition("Synced", True, "Synced")], 1)
    assert by_handler is not None and status_of(by_handler, "Synced") == "True"
    by_timer = known.merge(
        OWNER, stale, [condition("AgentsAvailable", True, "AgentsAvailable")], 1)
    assert by_timer is not None
    assert (status_of(by_timer, "Synced"), status_of(by_timer, "AgentsAvailable")) == (
        "True", "True")
    assert status_of(known.conditions(OWNER, stale), "Synced") == "True"
    # nothing to patch once the body shows it
    assert known.merge(
        OWNER, by_timer, [condition("AgentsAvailable", True, "AgentsAvailable")], 1) is None


def test_the_body_counts_again_once_the_memory_is_old_and_after_a_delete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    known = Written()
    known.merge(OWNER, None, [condition("Synced", True, "Synced")], 1)
    written_elsewhere = [{"type": "Synced", "status": "False", "reason": "InvalidSpec"}]
    monkeypatch.setattr(writer, "CONDITIONS_MEMORY_SECONDS", -1.0)
    assert known.conditions(OWNER, written_elsewhere) == written_elsewhere
    monkeypatch.undo()
    known.merge(OWNER, None, [condition("Synced", True, "Synced")], 1)
    known.forget(OWNER)
    assert known.conditions(OWNER, written_elsewhere) == written_elsewhere


def test_the_writer_refuses_a_key_it_does_not_own() -> None:
    patch = kopf.Patch()
    found = Writer(Written(), OWNER, {}, 1, patch)
    found.put("jobName", "nightly")
    with pytest.raises(KeyError):
        found.put("nextFireTime", "2026-01-01T00:00:00Z")  # the observation's, not a handler's
    assert dict(patch.status) == {"jobName": "nightly"}


def test_only_the_writer_touches_a_resource_s_status() -> None:
    package = Path(writer.__file__).parent
    writing = sorted(p.name for p in package.glob("*.py")
                     if re.search(r"patch\.status\[", p.read_text()))
    assert writing == ["writer.py"]


def test_the_observed_keys_patch_only_what_changed_and_keep_the_last_missed_time() -> None:
    observed = ObservedStatus(orphaned_runs=OrphanedRuns(current=0, last24h=0),
                              failed_runs=FailedRuns(last24h=0),
                              missed_runs=MissedRuns(last24h=0, total=2), live_agents=1,
                              durability="asynchronous", tzdata_versions=["2025b"])
    shown = {"liveAgents": 1, "orphanedRuns": {"current": 0, "last24h": 0},
             "missedRuns": {"last24h": 0, "total": 2, "lastMissedTime": "2026-01-01T00:00:00Z"},
             "nextFireTime": "2026-01-02T00:00:00Z"}
    patch = kopf.Patch()
    Writer(Written(), OWNER, shown, 1, patch).observed(observed)
    assert dict(patch.status) == {"failedRuns": {"last24h": 0}, "nextFireTime": None,
                                  "nextFireTimes": [], "activeRuns": 0, "late": False,
                                  "consecutiveFailures": 0, "failing": False,
                                  "durability": "asynchronous", "tzdataVersions": ["2025b"]}


def test_every_status_key_of_the_crd_has_its_writer() -> None:
    crd = yaml.safe_load((Path(__file__).resolve().parents[2] / "crds" / "claimschedule.yaml")
                         .read_text())
    keys = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "properties"]
    written = [*writer.OBSERVED_KEYS, *writer.HANDLER_KEYS, "conditions"]
    assert sorted(written) == sorted(keys)
