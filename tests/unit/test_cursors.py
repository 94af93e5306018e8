"""The planner's cursors in an agent: one integer per handler's job, the same plans as a dict."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import MutableMapping
from datetime import UTC, datetime, timedelta

from claimsched.plan.cursors import Cursors
from claimsched.plan.cursors import __file__ as cursors_file
from claimsched.plan.handlers import Handlers
from claimsched.plan.planner import Entry, Planner
from claimsched.records import ClaimResult
from claimsched.run.runs import Run
from claimsched.schedule.specs import ScheduleRecord

NOW = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def handler(run: Run) -> None:
    pass


def registered(names: list[str]) -> Handlers:
    handlers = Handlers()
    for name in names:
        handlers.add(name, handler)
    return handlers


def test_cursors_are_a_mapping_of_the_handlers_jobs_and_of_any_other_name() -> None:
    cursors = Cursors(registered(["a", "b", "c"]))
    assert len(cursors) == 0 and cursors.get("a") is None and "a" not in cursors
    cursors["c"], cursors["a"], cursors["stranger"] = NOW, NOW - timedelta(days=400), NOW
    cursors["c"] = NOW + timedelta(microseconds=1)
    assert dict(cursors) == {"a": NOW - timedelta(days=400), "c": NOW + timedelta(microseconds=1),
                             "stranger": NOW}
    assert cursors["c"].tzinfo is not None and len(cursors) == 3
    assert cursors.pop("a") == NOW - timedelta(days=400) and cursors.pop("a", None) is None
    del cursors["stranger"]
    assert list(cursors) == ["c"]
    cursors.clear()
    assert len(cursors) == 0 and dict(cursors) == {}
    cursors["b"] = NOW
    assert dict(cursors) == {"b": NOW}


def test_100000_cursors_take_8_bytes_each() -> None:
    names = [f"job{i:06d}" for i in range(100_000)]
    handlers = registered(names)
    assert len(handlers.names) == 100_000  # merged before measuring
    tracemalloc.start()
    try:
        cursors = Cursors(handlers)
        for i, name in enumerate(names):
            cursors[name] = NOW + timedelta(seconds=i)
        # what cursors.py holds, not what other threads (a previous test's) allocate meanwhile
        mine = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, cursors_file)])
        size = sum(stat.size for stat in mine.statistics("filename"))
    finally:
        tracemalloc.stop()
    # a dict of them: ~40 bytes, and a datetime per instant
    assert size > 100_000 * 8 and size / len(names) < 9
    assert cursors["job099999"] == NOW + timedelta(seconds=99_999) and len(cursors) == 100_000


def test_a_planner_with_cursors_plans_what_it_plans_with_a_dict() -> None:
    names = [f"j{i:03d}" for i in range(300)]
    rows = {name: ScheduleRecord(job_name=name, schedule=f"@every {1 + i % 7}s",
                                 catch_up_window_seconds=30, catch_up_policy="All",
                                 active_since=NOW - timedelta(hours=1), updated_at=NOW)
            for i, name in enumerate(names)}
    schedules = {name: Entry.of(row) for name, row in rows.items()}
    plans: list[tuple[list[object], dict[str, datetime]]] = []
    kinds: tuple[MutableMapping[str, datetime], ...] = ({}, Cursors(registered(names)))
    for cursors in kinds:
        planner, outcomes = Planner(rng=random.Random(7), cursors=cursors), random.Random(3)
        seen: list[object] = []
        for step in range(40):
            now = NOW + timedelta(seconds=step * 0.7)
            planned = planner.plan(schedules, now, capacity=20)
            seen.append([(c.job_name, c.fire_time, c.want) for c in planned])
            planner.learn(ClaimResult(c.job_name, c.fire_time, outcomes.choice(
                ["claimed", "taken", "no_capacity"]), None) for c in planned)
            seen.append(planner.next_due(schedules, now))
            if step == 20:
                planner.forget()
        plans.append((seen, dict(planner.cursors)))
    assert plans[0] == plans[1] and plans[0][1]
