"""How the demo shows what it sees: the live view (replicas, occurrences, events), the verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...db import RunRow
from .app import BATCHES, EFFECTS
from .observations import Effects, Key, Observations, hms

STATE_STYLE = {"running": "green", "killed": "bold red", "paused": "bold yellow",
               "stopped": "dim", "exited": "red"}
STATUS_STYLE = {"done": "green", "running": "yellow", "orphaned": "bold red", "failed": "red",
                "skipped": "dim", "pending": "cyan"}


def fault_notes(
    killed: tuple[str, Key] | None, paused: tuple[str, Key] | None,
    reclaimed: dict[Key, tuple[str | None, int]],
) -> dict[Key, str]:
    """What the demo did to these occurrences, for the "what happened" column."""
    notes: dict[Key, str] = {}
    if killed:
        name, key = killed
        notes[key] = f"{name} killed after {BATCHES[0]}"
        if key in reclaimed:
            notes[key] += (f"; orphan reclaimed by {reclaimed[key][0]} "
                           f"(attempt {reclaimed[key][1]}), {BATCHES[0]} not redone")
    if paused:
        name, key = paused
        notes[key] = f"{name} paused (SIGSTOP)"
        if key in reclaimed:
            notes[key] = f"{name} paused past its lease; taken over by {reclaimed[key][0]}"
    return notes


@dataclass
class Frame:
    """Everything one refresh of the live view shows."""

    title: str
    elapsed: float
    duration: float
    phase: str
    replicas: list[tuple[str, int, str]]
    runs: list[RunRow]
    effects: Effects
    seen: Observations
    events: Sequence[tuple[float, str]]
    notes: dict[Key, str]
    db_now: datetime


def _winner(run: RunRow, owners: dict[int, str]) -> Text:
    chain = [owners[a] for a in sorted(owners) if a <= run.attempt]
    if not chain and run.claimed_by:
        chain = [run.claimed_by]
    text = Text()
    for index, who in enumerate(chain):
        if index:
            text.append(" → ", style="dim")
        text.append(who, style="bold" if index == len(chain) - 1 else "strike dim")
    return text


def _note(run: RunRow, key: Key, frame: Frame) -> Text:
    parts: list[tuple[str, str]] = []
    if key in frame.notes:
        parts.append((frame.notes[key], "bold"))
    if run.attempt > 1 and key not in frame.notes:
        parts.append((f"orphan reclaimed (attempt {run.attempt})", "magenta"))
    for who in frame.seen.refused_effects.get(key, []):
        parts.append((f"{who}'s late effect refused", "yellow"))
    for who in frame.seen.fenced.get(key, []):
        parts.append((f"{who}'s late completion refused", "yellow"))
    down = {name for name, _, state in frame.replicas if state in {"killed", "paused"}}
    if run.status == "running" and run.claimed_by in down and run.lease_until:
        left = (run.lease_until - frame.db_now).total_seconds()
        parts.append((f"its lease runs out in {left:.1f}s" if left > 0
                      else "its lease expired: the reaper orphans it", "red"))
    if run.status == "orphaned":
        parts.append(("lease expired: orphan, waiting for a replica", "red"))
    text = Text()
    for index, (part, style) in enumerate(parts):
        text.append(("; " if index else "") + part, style=style)
    return text


def _occurrences(frame: Frame, limit: int) -> Table:
    keyed = [((r.job_name, r.fire_time), r) for r in frame.runs]
    special = [kr for kr in keyed if kr[0] in frame.notes or kr[1].attempt > 1]
    rest = [kr for kr in keyed if kr not in special][: max(0, limit - len(special))]
    shown = sorted(special[-limit:] + rest, key=lambda kr: kr[0][1], reverse=True)
    table = Table(title="occurrences (newest first)", title_justify="left", expand=True)
    for name, kwargs in (("fire time", {}), ("job", {}), ("won by", {}), ("try", {}),
                         ("status", {}), ("effects", {}), ("what happened", {"ratio": 1})):
        table.add_column(name, no_wrap=name != "what happened", **kwargs)  # type: ignore[arg-type]
    for key, run in shown:
        effects = frame.effects.get(key, [])
        wanted = len(EFFECTS.get(key[0], ()))
        dupes = len(effects) - len({e for e, _, _ in effects})
        style = "bold red" if dupes else ("green" if len(effects) == wanted else "")
        label = f"{len(effects)}/{wanted}" + (f" ({dupes} DUPLICATE)" if dupes else "")
        table.add_row(
            hms(key[1]), key[0], _winner(run, frame.seen.owners.get(key, {})), str(run.attempt),
            Text(run.status, style=STATUS_STYLE.get(run.status, "")),
            Text(label, style=style), _note(run, key, frame),
        )
    return table


def render(frame: Frame, height: int, all_events: bool = False) -> RenderableType:
    header = Text.assemble(
        (frame.title, "bold"), "  ", (f"{frame.elapsed:5.1f}s / {frame.duration:.0f}s", "cyan"),
        "  ", (frame.phase, "italic"), "\n",
        ("Every replica races to insert each occurrence (UNIQUE job, fire time); the one insert "
         "that succeeds runs it. Effects are receipts + ledger rows, in one transaction.", "dim"),
    )
    fleet = Table(title="replicas", title_justify="left")
    for column in ("replica", "pid", "state", "runs started", "running now"):
        fleet.add_column(column)
    running = Counter(r.claimed_by for r in frame.runs if r.status == "running")
    for name, pid, state in frame.replicas:
        fleet.add_row(name, str(pid), Text(state, style=STATE_STYLE.get(state, "")),
                      str(frame.seen.starts.get(name, 0)), str(running.get(name, 0)))
    ledger = [e for effects in frame.effects.values() for e in effects]
    totals = Table.grid(padding=(0, 2))
    totals.add_column(style="dim")
    totals.add_column()
    keys = {(e, k) for k, effects in frame.effects.items() for e, _, _ in effects}
    totals.add_row("occurrences", str(len(frame.runs)))
    totals.add_row("side effects", str(len(ledger)))
    totals.add_row("duplicates", Text(str(len(ledger) - len(keys)),
                                      style="bold red" if len(ledger) > len(keys) else "green"))
    totals.add_row("orphans reclaimed", str(sum(1 for r in frame.runs if r.attempt > 1)))
    totals.add_row("late work refused", str(frame.seen.fenced_completions
                                            + frame.seen.refused_effect_count))
    top = Table.grid(padding=(0, 4))
    top.add_row(fleet, Panel(totals, title="so far", border_style="dim"))
    shown = frame.events if all_events else frame.events[-10:]
    events = Text("\n").join(Text(f"{t:5.1f}s  {text}") for t, text in shown)
    rows = max(4, height - len(frame.replicas) - 31)
    return Group(header, top, _occurrences(frame, rows),
                 Panel(events or Text("(nothing yet)", style="dim"), title="events",
                       title_align="left", border_style="dim"))


def render_verdict(summary: dict[str, Any]) -> RenderableType:
    table = Table(title="verdict", title_justify="left", show_header=False)
    table.add_column()
    table.add_column(justify="right")
    table.add_column()
    occ, checks = summary["occurrences"], summary["checks"]

    def mark(name: str) -> Text:
        return Text("ok", style="green") if checks[name] else Text("FAILED", style="bold red")

    after = sum(job["after_window"] for job in occ["by_job"].values())
    table.add_row("occurrences due in the window: expected / ran",
                  f"{occ['expected']} / {occ['seen']}", "")
    table.add_row("missed occurrences", str(occ["missed"]), mark("no_missed_occurrences"))
    table.add_row(f"runs recorded (in the window, and {after} due after it)",
                  str(summary["runs"]["rows"]), "")
    table.add_row("attempts made (a reclaimed run counts twice)",
                  str(summary["runs"]["attempts"]), "")
    table.add_row("side effects recorded", str(summary["effects"]["recorded"]), "")
    table.add_row("duplicate side effects", str(summary["effects"]["duplicates"]),
                  mark("no_duplicate_effects"))
    table.add_row("finished runs missing an effect", str(summary["effects"]["incomplete_runs"]),
                  mark("finished_runs_have_all_effects"))
    table.add_row("orphans reclaimed", str(summary["orphans_reclaimed"]), mark("orphan_reclaimed"))
    fenced = summary["fenced"]
    table.add_row("late completions / effects refused",
                  f"{fenced['completions_refused']} / {fenced['effects_refused']}",
                  mark("fenced_completion_refused"))
    table.add_row("kill and pause carried out", "", mark("scenario_complete"))
    held = summary["held"]
    line = Text("exactly once held" if held else "exactly once NOT shown: "
                + "; ".join(summary["reasons"]), style="bold green" if held else "bold red")
    return Group(table, line)
