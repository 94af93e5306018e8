"""The time-based chaos checks (bench/chaos/timeline.py) catch what they claim to catch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bench.chaos.timeline import TimeChecks, Timeline, Trace

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
JOBS = [{"name": "f", "concurrency_policy": "Forbid", "once": "notify"}]


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class History:
    """A Forbid job `f` with runs at fire times 0 and 10 (ids 1 and 2), each done in turn."""

    def __init__(self) -> None:
        self.audit: list[tuple[Any, ...]] = []
        self.starts: list[tuple[Any, ...]] = []
        self.receipts: list[tuple[Any, ...]] = []
        self.external: list[tuple[Any, ...]] = []
        self.trace = Trace()
        self.rows: dict[int, dict[str, Any]] = {}

    def version(self, rid: int, at: float, status: str, attempt: int = 1, **more: Any) -> None:
        old = self.rows.get(rid)
        new = {
            "id": rid,
            "job_name": "f",
            "fire_time": t(10 * (rid - 1)).isoformat(),
            "status": status,
            "attempt": attempt,
            "claimed_by": more.pop("owner", "a"),
            "lease_until": t(more.pop("lease", at + 3)).isoformat(),
            "error": more.pop("error", None),
        }
        self.rows[rid] = new
        op = "UPDATE" if old else "INSERT"
        self.audit.append((len(self.audit), op, t(at), t(at + 0.001), old, new))

    def handler(
        self, rid: int, start: float, end: float, attempt: int = 1, ok: bool = True
    ) -> None:
        fire = t(10 * (rid - 1))
        self.starts.append(("f", fire, "a", attempt, t(start)))
        self.trace.ends[("f", fire, attempt)] = (t(end), "ok" if ok else "error")

    def run(self, outages: list[tuple[str, datetime, datetime]] | None = None) -> TimeChecks:
        runs = [
            (rid, "f", t(10 * (rid - 1)), row["status"], row["attempt"])
            for rid, row in self.rows.items()
        ]
        checks = TimeChecks(JOBS, Timeline(sorted(self.audit, key=lambda e: e[2])), self.trace)
        checks.run(runs, self.starts, self.receipts, self.external, outages or [])
        return checks


def sequential() -> History:
    h = History()
    h.version(1, 0.0, "running")
    h.handler(1, 0.1, 5.0)
    h.version(1, 5.1, "done", lease=5.1)
    h.version(2, 10.0, "running")
    h.handler(2, 10.1, 12.0)
    h.version(2, 12.1, "done", lease=12.1)
    return h


def test_runs_one_after_the_other_pass() -> None:
    checks = sequential().run()
    assert checks.found == []
    assert checks.stats["forbid_busy_spans"] == 2
    assert checks.stats["forbid_handler_spans"] == 2


def test_a_second_run_granted_while_the_first_is_orphaned_is_an_overlap() -> None:
    h = History()
    h.version(1, 0.0, "running")
    h.version(1, 4.0, "orphaned")  # busy until reclaimed or finished
    h.version(2, 5.0, "running")
    h.version(2, 6.0, "done")
    h.version(1, 7.0, "running", attempt=2, owner="b")
    h.version(1, 8.0, "done", attempt=2, owner="b")
    found = h.run().found
    assert any("in progress at once" in line for line in found), found


def test_handlers_at_work_at_once_are_caught_and_a_fenced_out_handler_is_not() -> None:
    h = History()
    h.version(1, 0.0, "running", lease=20.0)
    h.handler(1, 0.1, 11.0)  # still at work, and still owning its run...
    h.version(2, 10.0, "running")  # ...when the next run started
    h.handler(2, 10.1, 12.0)
    h.version(1, 11.1, "done", lease=11.1)
    h.version(2, 12.1, "done", lease=12.1)
    found = h.run().found
    assert any("at work at once" in line for line in found), found
    h = History()  # ...but not when its lease had run out before: it was fenced out
    h.version(1, 0.0, "running", lease=3.0)
    h.handler(1, 0.1, 11.0)  # paused, woke at 11 s
    h.version(1, 4.0, "orphaned", lease=3.0)
    h.version(1, 4.5, "running", attempt=2, owner="b", lease=7.5)
    h.handler(1, 4.6, 5.0, attempt=2)
    h.version(1, 5.1, "done", attempt=2, owner="b", lease=5.1)
    h.version(2, 10.0, "running")
    h.handler(2, 10.1, 12.0)
    h.version(2, 12.1, "done", lease=12.1)
    assert h.run().found == []
    h.starts.append(("f", T0, "a", 1, t(10.5)))  # one that began after its lease: not at work
    checks = h.run()
    assert checks.found == [] and checks.stats["handlers_started_after_their_lease"] == 1


def test_a_run_recorded_done_whose_handler_failed_is_caught() -> None:
    h = sequential()
    h.handler(2, 10.1, 12.0, ok=False)
    found = h.run().found
    assert any("whose handler failed" in line for line in found), found


def test_a_receipt_committed_after_a_later_attempt_was_granted_is_caught() -> None:
    h = History()
    h.version(1, 0.0, "running", lease=3.0)
    h.version(1, 4.0, "orphaned", lease=3.0)
    h.version(1, 4.5, "running", attempt=2, owner="b")
    h.version(1, 5.0, "done", attempt=2, owner="b", lease=5.0)
    h.receipts.append(("notify", "f", T0, 1, t(4.0)))  # before the reclaim: fine
    assert h.run().found == []
    h.receipts[0] = ("notify", "f", T0, 1, t(6.0))  # the frozen attempt's, after it
    found = h.run().found
    assert any("committed after attempt 2 was granted" in line for line in found), found


def test_an_external_call_repeated_under_another_key_is_caught() -> None:
    h = sequential()
    h.external += [("f", T0, "notify", "k1", "a", 1), ("f", T0, "notify", "k1", "b", 2)]
    checks = h.run()
    assert checks.found == [] and checks.stats["external_calls_repeated"] == 1
    h.external.append(("f", T0, "notify", "k2", "c", 3))
    found = h.run().found
    assert any("2 idempotency keys" in line for line in found), found


@pytest.mark.parametrize("reclaimed", [False, True])
def test_a_handler_finishing_during_an_outage_is_counted_late_or_reclaimed(
    reclaimed: bool,
) -> None:
    h = History()
    h.version(1, 0.0, "running", lease=3.0)
    h.handler(1, 0.1, 2.0)  # finished while Postgres was away (1 s .. 8 s)
    h.version(1, 8.5, "orphaned", lease=3.0)
    if reclaimed:
        h.version(1, 8.6, "running", attempt=2, owner="b")
        h.handler(1, 8.7, 9.0, attempt=2)
        h.version(1, 9.1, "done", attempt=2, owner="b", lease=9.1)
    else:
        h.version(1, 8.7, "done", lease=8.7)
    checks = h.run([("long_outage", t(1.0), t(8.0))])
    assert checks.found == []
    assert checks.stats["handlers_finished_during_long_outage"] == 1
    if reclaimed:
        assert checks.stats["reclaimed_before_late_completion"] == 1
    else:
        assert checks.stats["completed_late_after_lease_end"] == 1
