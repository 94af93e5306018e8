"""A rolling upgrade as users run one: agents of the previous release (built from this
repository's git history: bench/releases.py) claim under load, this release's `migrate` runs
under them, they go on past a housekeeping period on the new schema, then the fleet is replaced
one replica at a time. An independent ledger (the app's own tables: every handler start, every
effect) proves that each occurrence ran exactly once, and the old agents' logs that the new
schema never refused them a statement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from bench.chaos.harness import Replicas, replicas
from bench.chaos.upgrade import SQL_TROUBLE
from bench.releases import MissingRelease, Release, isolated_env, previous
from psycopg import sql

from claimsched.tools.processes import stop_process
from claimsched.version import __version__
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

AGENTS = 3
HOUSEKEEPING = 0.5  # seconds: the harness's period (CLAIMSCHED_HOUSEKEEPING_SECONDS)
# `tick` claims, completes and records a receipt every second; `beat`'s handler outlives a
# heartbeat, so its lease is renewed; a manual run of `request` is taken by a reclaim. Between
# them, every statement an agent sends while it runs.
JOBS = [
    {"name": "tick", "schedule": "@every 1s", "after": "ledger",
     "lease_seconds": 5, "heartbeat_seconds": 1},
    {"name": "beat", "schedule": "@every 5s", "before": "first", "sleep": 2, "after": "second",
     "lease_seconds": 5, "heartbeat_seconds": 1},
    {"name": "request", "schedule": "@yearly", "after": "ledger"},
]
PERIODS = {"tick": 1, "beat": 5}


@pytest.fixture(scope="module")
def release() -> Release:
    try:
        return previous()
    except MissingRelease as missing:
        reason = str(missing)
    pytest.fail(reason, pytrace=False)


@pytest.fixture
def roles(empty_dsn: str) -> Iterator[tuple[str, str]]:
    """The names of the agent's and the operator's roles (`claimsched roles` creates them);
    dropped afterwards: roles outlive databases."""
    names = (f"cs_upgrade_agent_{os.getpid()}", f"cs_upgrade_operator_{os.getpid()}")
    yield names
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for role in names:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _claimsched(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, f"{' '.join(argv[2:])} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def _this_release(*argv: str) -> str:
    return _claimsched([sys.executable, "-m", "claimsched.cli", *argv])


def _live(group: Replicas, version: str) -> dict[str, int]:
    """The live agents of a release, by id, with the age of their presence row in seconds."""
    rows = group.query(
        "SELECT agent_id, extract(epoch FROM last_seen - started_at)::int FROM claimsched.agents"
        " WHERE version = %s AND stopped_at IS NULL"
        "   AND last_seen + make_interval(secs => ttl_seconds) > now()", [version])
    return dict(rows)


def _wait_live(group: Replicas, name: str, version: str) -> None:
    wait_for(lambda: name in _live(group, version), timeout=60, what=f"{name} to be live",
             log=group.dump)


def _now(group: Replicas) -> datetime:
    ((now,),) = group.query("SELECT now()")
    return now  # type: ignore[no-any-return]


def _done_since(group: Replicas, job: str, since: datetime, agent_prefix: str) -> bool:
    """Whether an agent whose id starts with `agent_prefix` finished a run of `job` that
    started after `since`."""
    return bool(group.query(
        "SELECT 1 FROM claimsched.job_runs WHERE job_name = %s AND status = 'done'"
        " AND started_at > %s AND starts_with(claimed_by, %s)", [job, since, agent_prefix]))


def _renewed_since(group: Replicas, since: datetime) -> bool:
    """Whether a run of `beat` that an old agent started after `since` has had its lease renewed
    (a claim sets lease_until to started_at plus the lease; only a renewal moves it on)."""
    return bool(group.query(
        "SELECT 1 FROM claimsched.job_runs WHERE job_name = 'beat' AND status = 'running'"
        " AND started_at > %s AND starts_with(claimed_by, 'old-')"
        " AND lease_until > started_at + make_interval(secs => 5)", [since]))


def _occurrences(period: int, start: datetime, end: datetime) -> list[datetime]:
    """The fire times of `@every <period>s` in (start, end]: multiples of it since the epoch."""
    first = int(start.timestamp()) // period * period + period
    return [datetime.fromtimestamp(t, start.tzinfo)
            for t in range(first, int(end.timestamp()) + 1, period)]


def _assert_exactly_once(group: Replicas, start: datetime, end: datetime) -> None:
    """Every occurrence of the periodic jobs in (start, end] started once and made each of its
    effects once; nothing anywhere started or made an effect twice."""
    starts = Counter(group.query("SELECT job, fire_time FROM public.starts"))
    effects = Counter(group.query("SELECT job, fire_time, entity FROM public.ledger"))
    assert not [k for k, n in starts.items() if n > 1], f"ran twice: {starts.most_common(3)}"
    assert not [k for k, n in effects.items() if n > 1], f"effect twice: {effects.most_common(3)}"
    for job, period in PERIODS.items():
        expected = _occurrences(period, start, end)
        missed = [t.isoformat() for t in expected if (job, t) not in starts]
        assert not missed, f"{job}: {len(missed)} of {len(expected)} occurrences missed: {missed}"
        (spec,) = [spec for spec in JOBS if spec["name"] == job]
        entities = {spec[key] for key in ("before", "after") if key in spec}
        unfinished = [t.isoformat() for t in expected
                      if any((job, t, entity) not in effects for entity in entities)]
        assert not unfinished, f"{job}: occurrences without all their effects: {unfinished}"


def _stop(group: Replicas, name: str) -> None:
    """SIGTERM, as a rollout stops a pod: the agent finishes its runs and says it is gone."""
    replica = group.running[name]
    code = stop_process(replica.process, grace=20)
    assert code == 0, f"{name} exited with {code}:\n{replica.output()[-3000:]}"


def test_the_previous_releases_agents_run_every_occurrence_once_through_migrate_and_rollout(
    release: Release, empty_dsn: str, roles: tuple[str, str], tmp_path: Path
) -> None:
    agent_role, operator_role = roles
    _claimsched(release.command("migrate", "--dsn", empty_dsn), isolated_env())
    _claimsched(release.command("roles", "--dsn", empty_dsn, "--agent-role", agent_role,
                                "--operator-role", operator_role), isolated_env())
    settings = {"CLAIMSCHED_DSN": psycopg.conninfo.make_conninfo(empty_dsn, user=agent_role),
                "CLAIMSCHED_HOUSEKEEPING_SECONDS": str(HOUSEKEEPING)}
    with replicas(empty_dsn, tmp_path, JOBS, **settings) as group:
        group.query(sql.SQL("GRANT INSERT ON public.starts, public.ledger TO {}").format(
            sql.Identifier(agent_role)))
        olds = [f"old-{index}" for index in range(AGENTS)]
        for name in olds:
            group.start(name, release=release)
        # psycopg prepares a statement at its fifth execution: as in a fleet that has run for
        # a while, the old agents' statements are prepared before the schema changes under them
        wait_for(lambda: (len(ages := _live(group, release.version)) == AGENTS
                          and min(ages.values()) >= 6 * HOUSEKEEPING),
                 timeout=60, what="the previous release's agents", log=group.dump)
        start = _now(group)

        migrated = _this_release("migrate", "--dsn", empty_dsn)
        since = _now(group)
        # Every statement the old agents send, against the new schema: claims, completions and
        # receipts (tick), renewals (beat), a reclaim (a manual run), housekeeping, for longer
        # than a housekeeping period.
        _this_release("trigger", "request", "--dsn", empty_dsn)
        wait_for(lambda: _renewed_since(group, since), timeout=30,
                 what="an old agent's renewal on the new schema", log=group.dump)
        wait_for(lambda: all(_done_since(group, job, since, "old-")
                             for job in ("tick", "beat", "request")),
                 timeout=30, what="the old agents' runs on the new schema", log=group.dump)
        wait_for(lambda: _now(group) > since + timedelta(seconds=4 * HOUSEKEEPING),
                 what="housekeeping periods on the new schema")

        # The rollout: one replica at a time, the new one live before the old one stops (a
        # Deployment's maxSurge 1, maxUnavailable 0).
        agents_mid_rollout = ""
        for index, name in enumerate(olds):
            group.start(f"new-{index}")
            _wait_live(group, f"new-{index}", __version__)
            if index == 0:
                agents_mid_rollout = _this_release("agents", "--json", "--dsn", empty_dsn)
            _stop(group, name)
        rolled = _now(group)
        wait_for(lambda: all(_done_since(group, job, rolled, "new-") for job in PERIODS),
                 timeout=30, what="the new fleet's runs", log=group.dump)
        end = _now(group) - timedelta(seconds=1)
        wait_for(lambda: not group.query(
                     "SELECT 1 FROM claimsched.job_runs WHERE fire_time <= %s"
                     " AND status <> 'done'", [end]),
                 timeout=30, what="every run of the window to finish", log=group.dump)

        _assert_exactly_once(group, start, end)
        for name, replica in group.running.items():
            trouble = [line for line in replica.output().splitlines() if SQL_TROUBLE.search(line)]
            assert not trouble, f"{name} had trouble with the database:\n" + "\n".join(trouble)
        ((manual,),) = group.query("SELECT agent FROM public.starts WHERE job = 'request'")
        assert manual.startswith("old-"), manual

    # What `migrate` and `agents` said while both releases ran.
    assert "agent API v1 (claimsched 0.1.0): kept for older agents" in migrated, migrated
    assert all(name in migrated for name in olds), migrated
    seen = {(a["agent_id"], a["version"], a["api"]) for a in json.loads(agents_mid_rollout)
            if a["alive"]}
    assert ("new-0", __version__, 2) in seen and ("old-1", release.version, 1) in seen, seen
