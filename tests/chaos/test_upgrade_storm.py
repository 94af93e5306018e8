"""A storm that begins on the previous release: its first fault is a rolling upgrade to this one
(bench/chaos/upgrade.py), then the other faults meet this release's agents, and every guarantee
the storm checks holds across both."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.chaos.config import ChaosConfig
from bench.chaos.faults import FLEET
from bench.chaos.plan import plan
from bench.chaos.report import summary
from bench.chaos.storm import run_seed
from bench.chaos.upgrade import ROLLING_UPGRADE

KINDS = (ROLLING_UPGRADE, "sigkill", "sigstop", "sigterm", "pg_outage", "trigger", "skew")


def upgrade_config(seed: int) -> ChaosConfig:
    return ChaosConfig(seed=seed, replicas=3, jobs=8, duration=30.0, kinds=KINDS)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_a_rolling_upgrade_comes_first_and_no_other_fault_meets_the_previous_release(
    seed: int,
) -> None:
    _, _, _, faults, _ = plan(upgrade_config(seed))
    upgrade, *others = faults
    assert (upgrade.kind, upgrade.target, upgrade.at) == (ROLLING_UPGRADE, FLEET, 0.5)
    assert others and all(f.at >= upgrade.until for f in others), faults
    assert {f.kind for f in faults} == set(KINDS), faults
    assert plan(upgrade_config(seed))[3] == faults  # the seed decides


@pytest.mark.slow
def test_a_storm_begun_on_the_previous_release_and_upgraded_never_breaks_a_guarantee(
    tmp_path: Path,
) -> None:
    report = run_seed(upgrade_config(5), tmp_path)
    print(summary(report))
    assert not report["violations"], summary(report)
    assert all(n >= 1 for n in report["fault_counts"].values()), summary(report)
    (upgrade,) = [e for e in report["faults_executed"] if e["kind"] == ROLLING_UPGRADE]
    assert "3 replicas rolled" in upgrade["detail"], upgrade
    assert report["occurrences_checked"] >= 100, summary(report)
