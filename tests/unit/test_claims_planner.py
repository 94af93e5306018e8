"""The planner: which occurrences a replica proposes, per catch-up and concurrency policy."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest

from claimsched.plan.planner import MISSED_LATEST, MISSED_NONE, SUPERSEDED, Entry, Planner, Sharing
from claimsched.plan.turns import HANDOFF, Turns
from claimsched.records import ClaimResult
from claimsched.schedule.specs import ScheduleRecord

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def record(**fields: object) -> ScheduleRecord:
    base: dict[str, object] = {
        "job_name": "job",
        "schedule": "@every 10s",
        "catch_up_window_seconds": 60,
        "active_since": NOW - timedelta(days=1),
        "updated_at": NOW,
    }
    return ScheduleRecord(**{**base, **fields})  # type: ignore[arg-type]


def plan(planner: Planner, rec: ScheduleRecord, now: datetime = NOW) -> list[tuple[str, str]]:
    candidates = planner.plan({rec.job_name: Entry.of(rec)}, now)
    return [(c.fire_time.strftime("%M:%S"), c.want) for c in candidates]


def test_a_fresh_agent_with_policy_latest_runs_the_newest_and_records_the_rest_as_skipped() -> None:
    candidates = Planner().plan({"job": Entry.of(record())}, NOW)
    assert [(c.fire_time.second, c.want) for c in candidates][-2:] == [
        (50, "skipped"),
        (0, "running"),
    ]
    assert len(candidates) == 6
    assert {c.reason for c in candidates if c.want == "skipped"} == {MISSED_LATEST}


def test_policy_all_proposes_every_missed_occurrence_inside_the_window() -> None:
    rec = record(catch_up_policy="All", concurrency_policy="Allow")
    assert plan(Planner(), rec) == [
        (f"{m:02d}:{s:02d}", "running")
        for m, s in [(59, 10), (59, 20), (59, 30), (59, 40), (59, 50), (0, 0)]
    ]


def test_policy_all_with_forbid_proposes_the_whole_backlog_for_the_database_to_order() -> None:
    rec = record(catch_up_policy="All")
    candidates = Planner().plan({"job": Entry.of(rec)}, NOW)
    assert [c.latest for c in candidates] == [False] * 5 + [True]
    assert {c.want for c in candidates} == {"running"}


def test_a_backlog_longer_than_one_pass_is_settled_oldest_first_without_gaps() -> None:
    rec = record(catch_up_policy="Latest", catch_up_window_seconds=3600)
    planner = Planner()
    first = Planner.plan(planner, {"job": Entry.of(rec)}, NOW)
    assert len(first) == 100 and {c.want for c in first} == {"skipped"}
    assert first[0].fire_time == NOW - timedelta(seconds=3590)
    planner.learn([ClaimResult("job", c.fire_time, "skipped", None) for c in first])
    second = planner.plan({"job": Entry.of(rec)}, NOW)
    assert second[0].fire_time == first[-1].fire_time + timedelta(seconds=10)


def test_policy_none_skips_an_occurrence_older_than_the_misfire_grace() -> None:
    rec = record(catch_up_policy="None")
    late = NOW + timedelta(seconds=9)
    assert plan(Planner(misfire_grace=timedelta(seconds=5)), rec, late)[-1] == ("00:00", "skipped")
    assert plan(Planner(misfire_grace=timedelta(seconds=5)), rec, NOW)[-1] == ("00:00", "running")
    skipped = Planner().plan({"job": Entry.of(rec)}, NOW)[0]
    assert skipped.reason == MISSED_NONE


def test_replace_supersedes_older_occurrences() -> None:
    rec = record(concurrency_policy="Replace", catch_up_policy="All")
    candidates = Planner().plan({"job": Entry.of(rec)}, NOW)
    assert {c.reason for c in candidates[:-1]} == {SUPERSEDED} and candidates[-1].want == "running"


def test_nothing_before_the_schedule_became_active_is_proposed() -> None:
    rec = record(active_since=NOW - timedelta(seconds=25))
    assert plan(Planner(), rec) == [
        ("59:40", "skipped"),
        ("59:50", "skipped"),
        ("00:00", "running"),
    ]


@pytest.mark.parametrize("blocked", ["no_capacity", "contended"])
def test_settled_outcomes_advance_the_cursor_and_blocked_ones_do_not(blocked: str) -> None:
    planner = Planner()
    rec = record(catch_up_policy="All", concurrency_policy="Allow")
    plan(planner, rec)
    times = [NOW - timedelta(seconds=s) for s in (20, 10, 0)]
    outcomes = ["taken", blocked, "claimed"]
    pending = planner.learn(
        ClaimResult("job", t, o, None)
        for t, o in zip(times, outcomes, strict=True)  # type: ignore[arg-type]
    )
    assert pending == {blocked} and planner.cursors["job"] == times[0]
    assert plan(planner, rec) == [("59:50", "running"), ("00:00", "running")]
    assert planner.next_due({"job": Entry.of(rec)}, NOW) == times[1]


def test_a_changed_schedule_or_a_forgotten_cursor_looks_back_over_the_window_again() -> None:
    planner = Planner()
    rec = record()
    assert len(plan(planner, rec)) == 6
    planner.learn([ClaimResult("job", NOW, "claimed", None)])
    assert plan(planner, rec) == []
    planner.forget()
    assert len(plan(planner, rec)) == 6
    planner.learn([ClaimResult("job", NOW, "claimed", None)])
    assert len(plan(planner, record(schedule="@every 20s"))) == 3


def test_a_disabled_schedule_proposes_nothing_and_is_never_due() -> None:
    rec = record(enabled=False)
    planner = Planner()
    assert plan(planner, rec) == []
    assert planner.next_due({"job": Entry.of(rec)}, NOW) is None


def test_a_zero_catch_up_window_still_runs_the_occurrence_that_is_due_now() -> None:
    rec = record(catch_up_window_seconds=0)
    planner = Planner(misfire_grace=timedelta(seconds=2))
    assert plan(planner, rec, NOW + timedelta(milliseconds=50)) == [("00:00", "running")]


def test_a_cursor_older_than_the_window_does_not_widen_it() -> None:
    rec = record(catch_up_policy="All", concurrency_policy="Allow", catch_up_window_seconds=20)
    planner = Planner()
    plan(planner, rec)
    planner.learn([ClaimResult("job", NOW - timedelta(seconds=50), "claimed", None)])
    assert [t for t, _ in plan(planner, rec)] == ["59:50", "00:00"]


def test_a_claim_proposes_about_twice_the_free_slots_of_due_jobs() -> None:
    records = {f"j{i}": record(job_name=f"j{i}") for i in range(50)}
    schedules = {name: Entry.of(rec) for name, rec in records.items()}
    planner = Planner()
    candidates = planner.plan(schedules, NOW, capacity=4)
    assert len({c.job_name for c in candidates if c.want == "running"}) == 8
    assert planner.truncated
    everything = Planner()
    assert len({c.job_name for c in everything.plan(schedules, NOW, capacity=100)}) == 50
    assert not everything.truncated


def test_peers_take_turns_first_and_the_others_propose_only_after_the_hand_off() -> None:
    schedules = {f"j{i}": Entry.of(record(job_name=f"j{i}")) for i in range(60)}
    peers = ("a", "b", "c")
    planners = {me: Planner(turns=Turns(me, peers)) for me in peers}
    first = {me: {c.job_name for c in p.plan(schedules, NOW, 100)} for me, p in planners.items()}
    assert all(first.values()), first  # each peer has turns
    assert set().union(*first.values()) == set(schedules)  # together: every job, once
    assert sum(map(len, first.values())) == len(schedules)
    planner = planners["a"]
    planner.learn([ClaimResult(name, NOW, "claimed", None) for name in first["a"]])
    assert planner.next_due(schedules, NOW) == NOW + HANDOFF
    assert planner.plan(schedules, NOW + HANDOFF / 2, 100) == []
    assert planner.plan(schedules, NOW + HANDOFF, 100) == []  # the others' are checked first
    later = planner.checks
    assert {c.job_name for c in later} == set(schedules) - first["a"]
    assert {c.fire_time for c in later if c.want == "running"} == {NOW}


def test_after_the_hand_off_a_peer_claims_only_what_the_first_claimer_left() -> None:
    """The occurrences handed to a peer are checked, not claimed: those their first claimer
    took wait for their next occurrence without a claim; those it left are claimed."""
    schedules = {f"j{i}": Entry.of(record(job_name=f"j{i}")) for i in range(60)}
    planner = Planner(turns=Turns("a", ("a", "b", "c")))
    ours = planner.plan(schedules, NOW, 100)
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed", None) for c in ours])
    assert planner.plan(schedules, NOW + HANDOFF, 100) == []
    checked = planner.checks
    job = checked[0].job_name
    claim = planner.confirmed({(job, NOW)})
    assert claim == [c for c in checked if c.job_name == job]  # all of its occurrences
    assert planner.checks == []
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed", None) for c in claim])
    nxt = NOW + timedelta(seconds=10)
    assert planner.plan(schedules, NOW + HANDOFF, 100) == []  # nothing to claim or check
    assert planner.checks == []
    assert planner.next_due(schedules, NOW + HANDOFF) == nxt  # each waits for its next


def test_at_its_instant_a_job_that_is_another_peers_turn_is_not_even_looked_at() -> None:
    """A pass at an instant costs what is this replica's turn: the others wait in the heap
    for their hand-off without computing their occurrences."""
    schedules = {f"j{i}": Entry.of(record(job_name=f"j{i}")) for i in range(60)}
    planner = Planner(turns=Turns("a", ("a", "b", "c")))
    planner.learn([ClaimResult(c.job_name, c.fire_time, "taken", None)
                   for c in planner.plan(schedules, NOW + HANDOFF, 100)])
    assert planner.plan(schedules, NOW + HANDOFF, 100) == []  # settled: each waits for its next
    nxt = NOW + timedelta(seconds=10)
    assert planner.next_due(schedules, NOW + HANDOFF) == nxt
    first = planner.plan(schedules, nxt, 100)
    ours = {c.job_name for c in first}
    assert 0 < len(ours) < 60 and planner.looked_at == len(ours)
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed", None) for c in first])
    assert planner.next_due(schedules, nxt) == nxt + HANDOFF
    assert planner.plan(schedules, nxt + HANDOFF, 100) == []
    assert {c.job_name for c in planner.checks} == set(schedules) - ours


def test_a_late_occurrence_is_anyones_turn_and_alone_every_one_is_ours() -> None:
    schedules = {f"j{i}": Entry.of(record(job_name=f"j{i}")) for i in range(60)}
    late = Planner(turns=Turns("a", ("a", "b", "c")))
    assert len({c.job_name for c in late.plan(schedules, NOW + HANDOFF, 100)}) == 60
    alone = Planner(turns=Turns("a", ("a",)))
    assert len({c.job_name for c in alone.plan(schedules, NOW, 100)}) == 60


def test_a_job_with_nothing_due_is_not_planned_again_before_its_next_occurrence() -> None:
    rec = record(schedule="@every 60s")
    planner = Planner()
    plan(planner, rec, NOW)
    planner.learn([ClaimResult("job", NOW, "claimed", None)])
    assert plan(planner, rec, NOW + timedelta(seconds=1)) == []
    assert planner.next_due({"job": Entry.of(rec)}, NOW) == NOW + timedelta(seconds=60)
    assert plan(planner, rec, NOW + timedelta(seconds=60)) == [("01:00", "running")]
    changed = record(schedule="@every 30s", active_since=NOW + timedelta(seconds=1))
    assert plan(planner, changed, NOW + timedelta(seconds=30)) == [("00:30", "running")]


def test_a_pass_looks_only_at_the_jobs_that_may_be_due_not_at_every_schedule() -> None:
    daily = {f"d{i}": record(job_name=f"d{i}", schedule=f"{i % 60} {i // 60 % 24} * * *")
             for i in range(2000)}
    every = {"e0": record(job_name="e0", schedule="@every 1s")}
    schedules = {name: Entry.of(rec) for name, rec in {**daily, **every}.items()}
    planner = Planner()
    first = planner.plan(schedules, NOW)
    assert planner.looked_at == 2001
    due = {c.job_name for c in first}
    assert "e0" in due and len(due) <= 3  # e0 and the daily jobs of the last minute
    planner.learn(ClaimResult(c.job_name, c.fire_time, "claimed", None) for c in first)
    later = NOW + timedelta(seconds=1)
    assert [c.job_name for c in planner.plan(schedules, later)] == ["e0"]
    assert planner.looked_at == 1  # e0, due again: what settled waits without a look
    planner.learn([ClaimResult("e0", later, "claimed", None)])
    assert planner.next_due(schedules, later) == later + timedelta(seconds=1)
    # A changed entry (in a new mapping) is looked at again, and only it.
    moved = record(job_name="d5", schedule="@every 1s", active_since=later)
    changed = {**schedules, "d5": Entry.of(moved)}
    then = later + timedelta(seconds=1)
    assert {c.job_name for c in planner.plan(changed, then)} == {"d5", "e0"}
    assert planner.looked_at == 2
    # Disabled: not looked at again until its entry changes.
    off = record(job_name="d5", schedule="@every 1s", enabled=False)
    disabled = {**changed, "d5": Entry.of(off)}
    planner.learn([ClaimResult("e0", then, "claimed", None)])
    assert [c.job_name for c in planner.plan(disabled, then)] == []
    planner.learn([])
    assert [c.job_name for c in planner.plan(disabled, then + timedelta(seconds=1))] == ["e0"]
    assert planner.looked_at == 1


def test_past_the_quota_a_pass_still_sends_every_quiet_new_job_to_the_heap() -> None:
    daily = {f"d{i}": record(job_name=f"d{i}", schedule=f"{i % 60} {i // 60 % 11 + 13} * * *")
             for i in range(2000)}
    every = {f"e{i}": record(job_name=f"e{i}", schedule="@every 1s") for i in range(50)}
    schedules = {name: Entry.of(rec) for name, rec in {**daily, **every}.items()}
    planner = Planner()
    first = planner.plan(schedules, NOW, capacity=4)
    assert planner.truncated and len({c.job_name for c in first}) == 8
    planner.plan(schedules, NOW, capacity=4)
    assert planner.looked_at == 8  # the first pass's proposals fill the quota again
    assert planner.next_due(schedules, NOW + timedelta(hours=1)) is not None


def test_a_herd_is_claimed_a_quota_per_pass_and_no_pass_looks_at_all_of_it() -> None:
    """10,000 jobs due at one instant, 16 free slots: each pass looks at about what it proposes
    (the last pass's proposals, then the next ones in line), never at every due job, and every
    job is proposed until it settles."""
    since = NOW - timedelta(seconds=5)
    jobs = {f"b{i:05d}": record(job_name=f"b{i:05d}", schedule="@every 30s", active_since=since)
            for i in range(10_000)}
    schedules = {name: Entry.of(rec) for name, rec in jobs.items()}
    planner = Planner()
    planner.plan(schedules, NOW - timedelta(seconds=1), capacity=16)  # all quiet: to the heap
    claimed: set[str] = set()
    passes = 0
    while len(claimed) < len(jobs):
        passes += 1
        candidates = planner.plan(schedules, NOW, capacity=16)
        assert planner.looked_at <= 3 * 32
        results = [ClaimResult(c.job_name, c.fire_time,
                               "claimed" if i < 16 else "no_capacity", None)
                   for i, c in enumerate(candidates)]
        claimed.update(r.job_name for r in results if r.outcome == "claimed")
        planner.learn(results)
        assert passes < 1000
    assert passes <= len(jobs) // 16 + 2
    assert planner.plan(schedules, NOW, capacity=16) == [] and not planner.truncated


def test_a_pass_proposes_more_when_other_replicas_took_most_of_the_last_ones() -> None:
    since = NOW - timedelta(seconds=5)
    jobs = {f"b{i:04d}": record(job_name=f"b{i:04d}", schedule="@every 30s", active_since=since)
            for i in range(1000)}
    schedules = {name: Entry.of(rec) for name, rec in jobs.items()}
    planner = Planner()
    first = planner.plan(schedules, NOW, capacity=4)
    assert len(first) == 8
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed" if i == 0 else "taken", None)
                   for i, c in enumerate(first)])
    assert len(planner.plan(schedules, NOW, capacity=4)) == 64  # 8 x 8: one in 8 was free
    planner.learn([])
    assert len(planner.plan(schedules, NOW, capacity=4)) == 8


def test_jobs_with_equal_schedules_share_one_shape_and_rows_written_together_one_entry() -> None:
    records = [record(job_name=f"j{i:05d}", schedule=f"{i % 60} 3 * * *") for i in range(10_000)]
    shared = Sharing()
    tracemalloc.start()
    try:
        entries = [Entry.of(r, shared) for r in records]
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len({id(e.shape) for e in entries}) == 60
    assert len({id(e.shape.schedule) for e in entries}) == 60
    assert len({id(e) for e in entries}) == 60  # equal entries: one object
    assert size / len(entries) < 10  # bytes per job (a row and its schedule were ~1.5 KB)
    assert Entry.of(records[0], shared) is entries[0]
    changed = Entry.of(record(job_name="j00000", schedule="0 3 * * *",
                              updated_at=NOW + timedelta(seconds=1)), shared)
    assert changed != entries[0]  # a changed row gets its own entry


def test_a_job_removed_and_added_again_with_another_schedule_starts_afresh() -> None:
    planner = Planner()
    daily = record(schedule="0 3 * * *")
    assert planner.plan({"job": Entry.of(daily)}, NOW) == []  # quiet until 03:00 tomorrow
    assert planner.plan({}, NOW) == []
    again = record(schedule="@every 10s", active_since=NOW - timedelta(seconds=5))
    assert [c.fire_time for c in planner.plan({"job": Entry.of(again)}, NOW)] == [NOW]


def test_a_job_moved_later_waits_for_its_new_time_and_its_old_one_proposes_nothing() -> None:
    planner = Planner()
    at = {"job": Entry.of(record(schedule="1 12 * * *"))}
    assert planner.plan(at, NOW) == []
    moved = {"job": Entry.of(record(schedule="5 12 * * *"))}
    assert planner.plan(moved, NOW) == [] and planner.looked_at == 1
    assert planner.next_due(moved, NOW) == NOW.replace(minute=1)  # the old instant, once
    assert planner.plan(moved, NOW.replace(minute=1)) == [] and planner.looked_at == 1
    assert planner.next_due(moved, NOW.replace(minute=1)) == NOW.replace(minute=5)
    assert planner.plan(moved, NOW.replace(minute=4, second=59)) == []
    assert planner.looked_at == 0
    due = planner.plan(moved, NOW.replace(minute=5))
    assert [(c.fire_time, c.want) for c in due] == [(NOW.replace(minute=5), "running")]


def test_a_peer_claims_what_was_left_to_it_as_its_free_slots_allow() -> None:
    """A herd whose first claimers are all busy: the checks find thousands unclaimed, and the
    claim that follows proposes about twice the free slots of them, not all (the others are
    proposed by the next passes)."""
    schedules = {f"j{i}": Entry.of(record(job_name=f"j{i}")) for i in range(300)}
    planner = Planner(turns=Turns("a", ("a", "b", "c")))
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed", None)
                   for c in planner.plan(schedules, NOW, None)])
    assert planner.plan(schedules, NOW + HANDOFF, capacity=4) == []
    checked = {c.job_name for c in planner.checks}
    assert len(checked) > 150  # the others' turns: checked, no slot needed for that
    claim = planner.confirmed({(c.job_name, c.fire_time) for c in planner.checks})
    assert len({c.job_name for c in claim}) == 8
    planner.learn([ClaimResult(c.job_name, c.fire_time, "claimed", None) for c in claim])
    later = {c.job_name for c in planner.plan(schedules, NOW + HANDOFF, capacity=4)}
    assert len(later) == 8 and later <= checked - {c.job_name for c in claim}
    assert planner.checks == []
