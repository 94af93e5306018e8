"""The invariants of recovery: superseded attempts, and what the recovery faults (recovery.py)
left behind, over what the database holds at the end.

- History: every attempt a reclaim superseded (its row orphaned, fenced out, or failed and
  retried, as the audit trail saw it) is kept in job_attempts with that outcome and its owner;
  every kept attempt belongs to a run that went on to a later attempt; and every fenced-out
  attempt was finished by a later one: its run ended done, or failed for its own error or with
  its attempts exhausted (being fenced out is never the job's failure).
- A replica paused while it held a reclaimed run: the paused attempt was superseded as
  orphaned or fenced out, or as failed for its handler's own error (a real outcome that came
  after its lease while nobody had taken over, then retried: a database that was away when the
  handler woke), or it is its run's last attempt and finished it (done late, or failed for
  good). Failed because it lost its lease is never right.
- A replica killed while it worked a backfilled run: the killed attempt was superseded as
  orphaned, or its run's last attempt (failed for good when attempts ran out; done when its
  completion committed as the kill came).
- Skipped occurrences give a reason their job's policies allow (the Forbid busy skip, the
  missed ones of catchUpPolicy Latest or None, Replace's superseded ones).
- The whole fleet down: no handler started meanwhile (the harness's own check), and what fell
  meanwhile was caught up per catchUpPolicy: All ran every occurrence (a Forbid job may skip
  one that came while it was busy), Latest ran the newest one it missed: an occurrence it
  skipped as missed has a newer one that was due when it was skipped.
- At any time: an occurrence skipped as missed (catchUpPolicy Latest) had a newer one due when
  it was skipped (a replica whose clock estimate ran ahead skipped on-time ones), unless it has
  no newer one at all (its newer ones fell after the schedules were disabled, at the end).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from claimsched.plan.planner import MISSED_LATEST, MISSED_NONE, SUPERSEDED

FORBID_BUSY = "skipped: the previous run is still running"
# How far the agent's estimate of the database clock may run ahead of it: an occurrence proposed
# as the newest due one may be that much after the statement's now().
CLOCK_SLACK = timedelta(milliseconds=250)

Taken = tuple[str, datetime, int, str]  # job, fire time, attempt, agent
# job, fire time, attempt, owner, status, error: an attempt's row as a reclaim found it
Superseded = tuple[str, datetime, int, str, str, str | None]


@dataclass
class RecoveryLog:
    """What the recovery faults did: the attempts they paused or killed, and when the whole
    fleet was down (wall clock: from the last exit to the first start)."""

    paused: list[Taken] = field(default_factory=list)
    killed: list[Taken] = field(default_factory=list)
    fleet_down: list[tuple[datetime, datetime]] = field(default_factory=list)


def fenced_out(error: str) -> bool:
    """Whether a run's error says its attempt lost the lease (a refused receipt, the app's own
    "lease lost" stop, or a give-back): not the job's failure, so never its final outcome
    while attempts remain."""
    text = error.lower()
    return "leaselost" in text or "lease lost" in text or text.startswith("fenced out")


def kept_as(status: str, error: str | None) -> str:
    """The outcome job_attempts keeps for an attempt whose row a reclaim found so."""
    if status == "failed":
        return "failed"
    return "fenced_out" if (error or "").startswith("fenced out ") else "orphaned"


class RecoveryChecks:
    """Each finding is one line (`found`); counts go to `stats`."""

    def __init__(
        self,
        jobs: dict[str, dict[str, Any]],
        max_attempts: dict[str, int],
        runs: list[tuple[Any, ...]],
    ) -> None:
        self.jobs = jobs
        self.max_attempts = max_attempts
        self.by_key = {(r[1], r[2]): r for r in runs}
        self.found: list[str] = []
        self.stats: Counter[str] = Counter()

    def run(
        self,
        attempts: list[tuple[Any, ...]],
        superseded: list[Superseded],
        log: RecoveryLog,
        starts: list[tuple[Any, ...]],
    ) -> list[str]:
        kept = {(a[0], a[1], a[2]): (a[4], a[5]) for a in attempts}
        self.history(kept, superseded)
        errors = {(job, fire, number): error or ""
                  for job, fire, number, _, status, error in superseded if status == "failed"}
        self.paused(kept, errors, log.paused)
        self.killed(kept, log.killed)
        self.skip_reasons()
        for low, high in log.fleet_down:
            self.fleet_down(low, high, starts)
        return self.found

    # every superseded attempt kept, as it was; every fenced-out one finished by a later one
    def history(self, kept: dict[tuple[str, datetime, int], tuple[str, str]],
                superseded: list[Superseded]) -> None:
        for job, fire, number, owner, status, error in superseded:
            where = f"{job} @ {fire:%H:%M:%S} attempt {number} ({owner}, {status})"
            got = kept.get((job, fire, number))
            if got is None:
                self.found.append(f"{where} was superseded without a job_attempts row")
            elif got != (owner, kept_as(status, error)):
                self.found.append(
                    f"{where} was kept as {got[1]} of {got[0]}, its row said "
                    f"{kept_as(status, error)}"
                )
        for (job, fire, number), (owner, outcome) in kept.items():
            where = f"{outcome} attempt {number} of {job} @ {fire:%H:%M:%S} ({owner})"
            row = self.by_key.get((job, fire))
            if row is None or row[4] <= number:
                self.found.append(f"{where} kept, but no later attempt of its run: {row}")
            elif outcome == "fenced_out" and not self._finished(row):
                self.found.append(
                    f"{where} never finished by a later attempt: its run is {row[3]} at attempt "
                    f"{row[4]} ({row[8]})"
                )
            elif outcome == "fenced_out":
                self.stats[f"fenced_out_finished_{row[3]}"] += 1

    def _finished(self, row: tuple[Any, ...]) -> bool:
        """Done, or failed for its own error or with its attempts exhausted."""
        status, attempt, error = row[3], row[4], row[8] or ""
        if status == "done":
            return True
        exhausted = attempt >= self.max_attempts.get(row[1], attempt)
        return status == "failed" and (exhausted or not fenced_out(error))

    # the paused attempt was superseded as orphaned, fenced out or failed for its own error, or
    # finished its run
    def paused(self, kept: dict[tuple[str, datetime, int], tuple[str, str]],
               errors: dict[tuple[str, datetime, int], str], paused: list[Taken]) -> None:
        for job, fire, number, agent in paused:
            where = f"{job} @ {fire:%H:%M:%S} attempt {number}, paused on {agent},"
            got = kept.get((job, fire, number))
            row = self.by_key.get((job, fire))
            error = errors.get((job, fire, number))
            if got is not None and got[1] in ("orphaned", "fenced_out") and got[0] == agent:
                self.stats[f"paused_attempts_{got[1]}"] += 1
            elif got == (agent, "failed") and error is not None and not fenced_out(error):
                self.stats["paused_attempts_failed_for_their_own_error"] += 1
            elif got is not None:
                because = f" ({error})" if error else ""
                self.found.append(f"{where} was superseded as {got[1]} of {got[0]}{because}")
            elif row is not None and row[4] == number and self._finished(row):
                self.stats[f"paused_attempts_finished_{row[3]}"] += 1
            else:
                self.found.append(f"{where} was neither superseded nor finished: {row}")

    # the killed attempt was superseded as orphaned, or was its run's last
    def killed(self, kept: dict[tuple[str, datetime, int], tuple[str, str]],
               killed: list[Taken]) -> None:
        for job, fire, number, agent in killed:
            where = f"backfilled {job} @ {fire:%H:%M:%S} attempt {number}, killed on {agent},"
            got = kept.get((job, fire, number))
            row = self.by_key.get((job, fire))
            if got == (agent, "orphaned"):
                self.stats["killed_attempts_orphaned"] += 1
            elif got is not None:
                self.found.append(f"{where} was superseded as {got[1]} of {got[0]}")
            elif row is not None and row[4] == number and row[3] in ("done", "failed"):
                self.stats[f"killed_attempts_finished_{row[3]}"] += 1
            else:
                self.found.append(f"{where} was neither superseded nor finished: {row}")
            if row is not None and row[3] == "done":
                self.stats["killed_backfills_done"] += 1

    # a skipped occurrence's reason is one its job's policies allow
    def skip_reasons(self) -> None:
        for (job, fire), row in self.by_key.items():
            if row[3] != "skipped" or not row[8]:  # without a reason: _final_states
                continue
            concurrency, catch_up, reason = *self._policies(job), row[8]
            allowed = (
                (reason.startswith(FORBID_BUSY) and concurrency == "Forbid")
                or (reason == MISSED_LATEST and catch_up == "Latest")
                or (reason == MISSED_NONE and catch_up == "None")
                or (reason == SUPERSEDED and concurrency == "Replace")
            )
            if not allowed:
                self.found.append(
                    f"{job} @ {fire:%H:%M:%S} skipped ({reason}), which its policies "
                    f"({concurrency}, catchUpPolicy {catch_up}) do not allow"
                )
            self.stats["skipped_as_missed" if reason.startswith("missed") else
                        "skipped_busy" if reason.startswith(FORBID_BUSY) else "skipped_other"] += 1
        for job, fire, skipped, newer in self._missed_without_newer(None):
            if newer:  # the next occurrence came after the skip: on time, skipped as missed
                self.found.append(
                    f"{job} @ {fire:%H:%M:%S} skipped as missed at {skipped:%H:%M:%S.%f}, when "
                    "no newer occurrence was due: catchUpPolicy Latest runs the newest one")
            else:  # its newer ones fell after the schedules were disabled at the end
                self.stats["missed_skips_before_the_end"] += 1

    def _policies(self, job: str) -> tuple[str, str]:
        """concurrencyPolicy and catchUpPolicy, the product's defaults if the job has none."""
        spec = self.jobs[job]
        return spec.get("concurrency_policy", "Forbid"), spec.get("catch_up_policy", "Latest")

    def _missed_without_newer(
        self, window: tuple[datetime, datetime] | None
    ) -> list[tuple[str, datetime, datetime, bool]]:
        """Occurrences of Latest jobs skipped as missed (inside `window`, if any) while no newer
        occurrence of the job was due: (job, fire time, when it was skipped, whether the job
        has a newer occurrence at all)."""
        fires: dict[str, list[datetime]] = defaultdict(list)
        for job, fire in self.by_key:
            fires[job].append(fire)
        found = []
        for (job, fire), row in self.by_key.items():
            if row[3] != "skipped" or row[8] != MISSED_LATEST or row[7] is None:
                continue
            if window is not None and not window[0] < fire <= window[1]:
                continue
            newer = [f for f in fires[job] if f > fire]
            if not newer or min(newer) > row[7] + CLOCK_SLACK:
                found.append((job, fire, row[7], bool(newer)))
        return found

    # what fell while the whole fleet was down was caught up per catchUpPolicy
    def fleet_down(self, low: datetime, high: datetime, starts: list[tuple[Any, ...]]) -> None:
        for job, fire, agent, attempt, at in starts:
            if low < at < high:
                self.found.append(
                    f"harness: {agent} started {job} @ {fire:%H:%M:%S} attempt {attempt} at "
                    f"{at:%H:%M:%S.%f}, while the whole fleet was down ({low:%H:%M:%S.%f}.."
                    f"{high:%H:%M:%S.%f})"
                )
        for (job, fire), row in self.by_key.items():
            if low < fire <= high:
                self.stats["fleet_down_occurrences"] += 1
                self.stats[f"fleet_down_{self._policies(job)[1]}_{row[3]}"] += 1
        for job, fire, skipped, _ in self._missed_without_newer((low, high)):
            self.found.append(
                f"{job} @ {fire:%H:%M:%S} fell while the whole fleet was down and was skipped as "
                f"missed at {skipped:%H:%M:%S.%f}, when no newer occurrence was due: catchUpPolicy "
                "Latest runs the newest missed one"
            )
