"""The agent's handler registry: every name and handler kept, in ~12 bytes per job."""

from __future__ import annotations

import tracemalloc
from typing import Any

from claimsched.plan.handlers import Handlers
from claimsched.run.runs import Run


def first(run: Run) -> None:
    pass


def second(run: Run) -> Any:
    return None


def test_100000_jobs_of_two_handlers_cost_little_more_than_their_names() -> None:
    names = [f"job{i:06d}" for i in reversed(range(100_000))]
    tracemalloc.start()
    try:
        handlers = Handlers()
        for i, name in enumerate(names):
            assert handlers.add(name, first if i % 3 else second)
        assert handlers.names[:2] == ["job000000", "job000001"]  # merged, sorted
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert size / len(names) < 16  # bytes per job besides its name (a dict: ~40 with a list)
    assert len(handlers) == 100_000 and list(handlers) == sorted(names)
    assert handlers["job099999"] is second and handlers["job099998"] is first
    assert "job000007" in handlers and "job100000" not in handlers
    assert handlers.own("job000042") is names[-43]  # the registered string, not a copy
    assert handlers.own("nope") is None and handlers.get("nope") is None


def test_a_name_is_registered_once_before_and_after_the_names_are_merged() -> None:
    handlers = Handlers()
    assert handlers.add("b", first) and not handlers.add("b", second)
    assert handlers["b"] is first  # merged
    assert not handlers.add("b", second) and handlers.add("a", second)
    assert "a" in handlers and len(handlers) == 2
    assert handlers.names == ["a", "b"] and handlers["a"] is second and handlers["b"] is first
