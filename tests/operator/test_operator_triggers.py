"""The trigger plan's rules, without processes (the crash itself: test_operator_scenarios)."""

from __future__ import annotations

from datetime import UTC, datetime

from claimsched_operator.triggers import Plan, digest, handled, recorded_value

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_a_trigger_counts_as_handled_only_once_its_plan_and_lastTrigger_agree() -> None:
    plan = Plan.new("one", NOW)
    assert plan.fire_time.microsecond == 1  # never a whole second: no scheduled occurrence's key
    assert Plan.decode(plan.encode()) == plan
    assert Plan.decode(None) is None and Plan.decode("not json") is None

    assert not handled("one", None, None)  # new value
    assert not handled("one", None, plan)  # planned (maybe requested), not recorded: repeat
    assert handled("one", "one", plan)
    assert handled("one", "one", None)  # handled before plans existed
    assert not handled("two", "one", plan)  # a new value gets a new plan
    assert not handled("one", "one", Plan.new("two", NOW))  # back to "one" after "two"

    long = "x" * 300  # lastTrigger keeps 253 characters; the plan tells long values apart
    assert recorded_value(long) == "x" * 253
    assert handled(long, recorded_value(long), Plan.new(long, NOW))
    assert not handled(long + "y", recorded_value(long), Plan.new(long, NOW))
    assert digest(long) != digest(long + "y")
