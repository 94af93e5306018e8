"""The invariants of a storm, over what the database holds at the end (Checker): no occurrence
claimed twice, finished runs never changed, fencing tokens that only grow, effects and receipts
that agree, handlers only for granted attempts, every expected occurrence accounted for."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .recovery_checks import RecoveryChecks, RecoveryLog, Superseded, fenced_out

TERMINAL = ("done", "skipped")
UNFINISHED = ("running", "orphaned", "pending")


def expected_fire_times(period: int, active_since: datetime, cutoff: datetime) -> list[datetime]:
    """The occurrences of an `@every <period>s` job after `active_since`, up to `cutoff`."""
    first = math.floor(active_since.timestamp() / period) * period + period
    last = int(cutoff.timestamp())
    return [datetime.fromtimestamp(s, UTC) for s in range(int(first), last + 1, period)]


class Checker:
    """The invariants, over what the database holds at the end. Each finding is one line."""

    def __init__(
        self,
        jobs: list[dict[str, Any]],
        active_since: dict[str, datetime],
        cutoff: dict[str, datetime],
        schedules: dict[str, tuple[Any, ...]],
        recovery: RecoveryLog | None = None,
        history_from: int = 0,
    ) -> None:
        self.jobs = {j["name"]: j for j in jobs}
        # the audit trail's position after which every superseded attempt has a history (a storm
        # that began on the previous release: upgrade.py)
        self.history_from = history_from
        self.active_since = active_since
        self.cutoff = cutoff
        self.schedules = schedules
        self.recovery = recovery or RecoveryLog()
        self.superseded: list[Superseded] = []  # attempts reclaims took over (audit trail)
        self.stats: Counter[str] = Counter()
        self.found: list[str] = []

    def fail(self, text: str) -> None:
        if len(self.found) < 200:
            self.found.append(text)
        self.stats["violations_total"] += 1

    def check(
        self,
        runs: list[tuple[Any, ...]],
        receipts: list[tuple[Any, ...]],
        ledger: list[tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
        audit: list[tuple[Any, ...]],
        attempts: Sequence[tuple[Any, ...]] = (),
    ) -> list[str]:
        by_key = {(r[1], r[2]): r for r in runs}
        grants = self._audit(audit)
        self._final_states(runs)
        self._expected(by_key)
        self._effects(by_key, receipts, ledger, grants)
        self._starts(by_key, starts, grants)
        self._recovery(runs, attempts, starts)
        self.stats["rows"] = len(runs)
        self.stats["receipts"] = len(receipts)
        self.stats["ledger_rows"] = len(ledger)
        self.stats["handler_starts"] = len(starts)
        for status, n in Counter(r[3] for r in runs).items():
            self.stats[f"status_{status}"] = n
        return self.found

    # no occurrence claimed twice, no finished run changed, maintenance moves rows unchanged,
    # fencing tokens only grow by one on a reclaim, at most one completion per occurrence
    def _audit(self, audit: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
        state: dict[int, dict[str, Any]] = {}
        deleted: dict[int, tuple[int, dict[str, Any]]] = {}
        inserted: Counter[tuple[str, datetime]] = Counter()
        completions: Counter[tuple[str, datetime]] = Counter()
        grants: set[tuple[Any, ...]] = set()
        for seq, op, tx, actor, old, new in audit:
            if op == "INSERT":
                rid = new["id"]
                if rid in deleted:
                    dtx, content = deleted.pop(rid)
                    self.stats["rows_moved_by_maintenance"] += 1
                    if dtx != tx:
                        self.fail(f"run {rid} deleted by tx {dtx}, put back by tx {tx}")
                    if content != new:
                        self.fail(
                            f"maintenance moved run {rid} and changed it: {_diff(content, new)}"
                        )
                elif rid in state:
                    if state[rid] != new:
                        self.fail(
                            f"run {rid} copied by {actor} and changed: {_diff(state[rid], new)}"
                        )
                else:
                    key = _key(new)
                    inserted[key] += 1
                    if inserted[key] > 1:
                        self.fail(f"occurrence {key} claimed twice (second row id {rid})")
                    if new["status"] == "running":
                        grants.add((*key, new["attempt"], new["claimed_by"]))
                state[rid] = new
            elif op == "DELETE":
                rid = old["id"]
                deleted[rid] = (tx, old)
                state.pop(rid, None)
            else:
                self._transition(old, new, completions, grants, seq > self.history_from)
                state[new["id"]] = new
        for rid, (_tx, content) in deleted.items():
            self.fail(f"run {rid} was deleted and never put back: {_short(content)}")
        for key, n in completions.items():
            if n > 1:
                self.fail(f"occurrence {key} completed as done {n} times")
        self.stats["audit_events"] = len(audit)
        return grants

    def _transition(
        self,
        old: dict[str, Any],
        new: dict[str, Any],
        completions: Counter[tuple[str, datetime]],
        grants: set[tuple[Any, ...]],
        kept: bool = True,  # the attempt a reclaim supersedes here must have a history
    ) -> None:
        key = _key(new)
        if _terminal(old):
            if old != new:
                self.fail(f"finished run {key} changed: {_diff(old, new)}")
            return
        if new["attempt"] != old["attempt"]:
            if not (
                new["attempt"] == old["attempt"] + 1
                and new["status"] == "running"
                and old["status"] in ("orphaned", "pending", "failed")
            ):
                self.fail(
                    f"run {key} attempt {old['attempt']} -> {new['attempt']} "
                    f"({old['status']} -> {new['status']})"
                )
            grants.add((*key, new["attempt"], new["claimed_by"]))
            self.stats["reclaims" if old["status"] == "orphaned" else "retries_or_requests"] += 1
            if old["status"] in ("orphaned", "failed") and kept:
                self.superseded.append(
                    (*key, old["attempt"], old["claimed_by"], old["status"], old["error"])
                )
        elif new["claimed_by"] != old["claimed_by"]:
            self.fail(f"run {key} changed owner without a new fencing token: {_diff(old, new)}")
        if new["status"] == "orphaned" and old["status"] != "orphaned":
            self.stats["orphaned"] += 1
        if new["status"] == "done":
            # from orphaned: a late completion (the owner paused or cut off past its lease,
            # nobody reclaimed the run meanwhile: same attempt and owner, checked above)
            if old["status"] not in ("running", "orphaned"):
                self.fail(f"run {key} done from {old['status']}")
            elif old["status"] == "orphaned":
                self.stats["done_from_orphaned"] += 1
            completions[key] += 1

    # every orphan was reclaimed or failed for good; nothing runs past its lease at the end;
    # skipped and failed runs say why; failures stop only when attempts ran out
    def _final_states(self, runs: list[tuple[Any, ...]]) -> None:
        for (
            _id,
            job,
            fire,
            status,
            attempt,
            owner,
            _lease,
            _fin,
            error,
            retry_at,
            _orphans,
            expired,
        ) in runs:
            where = f"{job} @ {fire:%H:%M:%S} (attempt {attempt}, {owner})"
            if status == "running" and expired:
                self.fail(f"{where} still running past its lease at the end")
            elif status in UNFINISHED:
                self.fail(f"{where} left {status} at the end")
            elif status == "failed" and retry_at is not None:
                self.fail(f"{where} failed and its retry never ran")
            elif status == "skipped" and not error:
                self.fail(f"{where} skipped without a reason")
            elif status == "failed":
                max_attempts, retry = self.schedules[job][1:3]
                if not error:
                    self.fail(f"{where} failed without an error")
                elif fenced_out(error) and attempt < max_attempts:
                    self.fail(f"{where} failed only because it was fenced out: {error}")
                elif retry and attempt < max_attempts:
                    self.fail(
                        f"{where} failed for good after {attempt} of {max_attempts} "
                        f"attempts: {error}"
                    )
                else:
                    self.stats["failed_after_max_attempts"] += 1

    # superseded attempts kept and finished; what the recovery faults left (recovery_checks.py)
    def _recovery(
        self,
        runs: list[tuple[Any, ...]],
        attempts: Sequence[tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
    ) -> None:
        max_attempts = {job: row[1] for job, row in self.schedules.items()}
        checks = RecoveryChecks(self.jobs, max_attempts, runs)
        for text in checks.run(list(attempts), self.superseded, self.recovery, starts):
            self.fail(text)
        self.stats.update(checks.stats)

    # every expected occurrence inside the catch-up window ran or is accounted for
    def _expected(self, by_key: dict[tuple[str, datetime], tuple[Any, ...]]) -> None:
        for name, job in self.jobs.items():
            for fire in expected_fire_times(
                job["period"], self.active_since[name], self.cutoff[name]
            ):
                self.stats["expected"] += 1
                row = by_key.get((name, fire))
                if row is None:
                    self.fail(f"{name} @ {fire:%H:%M:%S} never ran and was never recorded")
                    continue
                self.stats[f"expected_{row[3]}"] += 1

    # no occurrence has two effects for one key; receipts and the app's writes agree;
    # a done run has every effect of its handler; effects came from granted attempts
    def _effects(
        self,
        by_key: dict[tuple[str, datetime], tuple[Any, ...]],
        receipts: list[tuple[Any, ...]],
        ledger: list[tuple[Any, ...]],
        grants: set[tuple[Any, ...]],
    ) -> None:
        receipt_at = {(r[1], r[2], r[0]): r for r in receipts}
        written: Counter[tuple[Any, ...]] = Counter()
        for job, fire, entity, agent, attempt in ledger:
            key = (job, fire, entity)
            written[key] += 1
            if written[key] == 2:
                self.fail(f"effect {entity!r} of {job} @ {fire:%H:%M:%S} happened twice")
            entity_key = entity.removeprefix("once:")
            receipt = receipt_at.get((job, fire, entity_key))
            if receipt is None:
                self.fail(f"effect {entity!r} of {job} @ {fire:%H:%M:%S} has no receipt")
            elif receipt[4] != attempt:
                self.fail(
                    f"effect {entity!r} of {job} @ {fire:%H:%M:%S} by attempt {attempt}, "
                    f"receipt by attempt {receipt[4]}"
                )
            if (job, fire, attempt, agent) not in grants:
                self.fail(
                    f"effect {entity!r} of {job} @ {fire:%H:%M:%S} by {agent} attempt "
                    f"{attempt}, which was never granted that lease"
                )
        plain = {k for k in written if not k[2].startswith("once:")}
        for job, fire, entity in receipt_at:
            if by_key.get((job, fire)) is None:
                self.fail(f"receipt {entity!r} for {job} @ {fire:%H:%M:%S} without a run")
            once = self.jobs[job].get("once") == entity
            if not once and (job, fire, entity) not in plain:
                self.fail(
                    f"receipt {entity!r} of {job} @ {fire:%H:%M:%S} without the app's "
                    "write of the same transaction"
                )
        for (job, fire), row in by_key.items():
            if row[3] != "done":
                continue
            spec = self.jobs[job]
            for step in ("before", "once", "after"):
                if spec.get(step) and (job, fire, spec[step]) not in receipt_at:
                    self.fail(f"{job} @ {fire:%H:%M:%S} done without its {spec[step]!r} effect")

    # one handler per attempt, and only for attempts the database granted
    def _starts(
        self,
        by_key: dict[tuple[str, datetime], tuple[Any, ...]],
        starts: list[tuple[Any, ...]],
        grants: set[tuple[Any, ...]],
    ) -> None:
        seen: Counter[tuple[Any, ...]] = Counter()
        for job, fire, agent, attempt, _at in starts:
            seen[(job, fire, attempt)] += 1
            if seen[(job, fire, attempt)] == 2:
                self.fail(f"{job} @ {fire:%H:%M:%S} attempt {attempt} ran twice")
            if (job, fire, attempt, agent) not in grants:
                self.fail(
                    f"{job} @ {fire:%H:%M:%S}: {agent} ran attempt {attempt} "
                    "without being granted it"
                )
            row = by_key.get((job, fire))
            if row is not None and attempt > row[4]:
                self.fail(f"{job} @ {fire:%H:%M:%S}: attempt {attempt} ran, row says {row[4]}")
        reruns = Counter((job, fire) for job, fire, *_ in starts)
        self.stats["occurrences_run_more_than_once"] = sum(1 for n in reruns.values() if n > 1)


def _key(row: dict[str, Any]) -> tuple[str, datetime]:
    return row["job_name"], datetime.fromisoformat(row["fire_time"])


def _terminal(row: dict[str, Any]) -> bool:
    return row["status"] in TERMINAL or (row["status"] == "failed" and row["retry_at"] is None)


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(set(a) | set(b))
    return ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k))


def _short(row: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={row.get(k)}"
        for k in ("id", "job_name", "fire_time", "status", "attempt", "claimed_by")
    )
