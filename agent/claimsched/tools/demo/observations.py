"""What the demo learns from its replicas' log lines: who started which attempt, what was
refused."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_FIELD = re.compile(r"\b(agent|job|fire_time|attempt|action)=(\S+)")
_LEVEL = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$")
Key = tuple[str, datetime]
Effects = dict[Key, list[tuple[str, str, int]]]  # (job, fire time) -> [(entity, agent, attempt)]

def hms(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%H:%M:%S")


def effects_by_key(rows: Iterable[tuple[Any, ...]]) -> Effects:
    """The demo ledger's rows, grouped by occurrence."""
    effects: Effects = defaultdict(list)
    for job, fire_time, entity, agent, attempt in rows:
        effects[(job, fire_time)].append((entity, agent, attempt))
    return effects


@dataclass
class LogLine:
    """One line a replica wrote, with claimsched's structured fields."""

    replica: str
    level: str
    message: str
    fields: dict[str, str]

    @property
    def action(self) -> str | None:
        return self.fields.get("action")

    @property
    def key(self) -> Key | None:
        if "job" not in self.fields or "fire_time" not in self.fields:
            return None
        try:
            return self.fields["job"], datetime.fromisoformat(self.fields["fire_time"])
        except ValueError:
            return None

    @property
    def attempt(self) -> int:
        try:
            return int(self.fields.get("attempt", "0"))
        except ValueError:
            return 0


def parse_line(replica: str, line: str) -> LogLine | None:
    found = _LEVEL.match(line)
    if found is None:
        return None
    level, _, rest = found.groups()
    fields = dict(_FIELD.findall(rest))
    message = _FIELD.split(rest, maxsplit=1)[0].strip()
    return LogLine(replica, level, message, fields)


class LogTail:
    """Reads the complete lines a replica has appended to its log since the last call."""

    def __init__(self, replica: str, path: Path) -> None:
        self.replica, self.path, self._offset, self._partial = replica, path, 0, b""

    def read(self) -> list[LogLine]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        parsed = (parse_line(self.replica, raw.decode(errors="replace")) for raw in lines)
        return [line for line in parsed if line is not None]


@dataclass
class Observations:
    """What the replicas said: who started which attempt, what was refused, what they did."""

    owners: dict[Key, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    fenced: dict[Key, list[str]] = field(default_factory=lambda: defaultdict(list))
    refused_effects: dict[Key, list[str]] = field(default_factory=lambda: defaultdict(list))
    starts: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)

    def learn(self, line: LogLine) -> str | None:
        """Record the line; returns the text of an event worth showing, if it is one."""
        action, key, who = line.action, line.key, line.replica
        if action:
            self.counts[action] += 1
        where = f"{key[0]} @ {hms(key[1])} (attempt {line.attempt})" if key else ""
        if action == "start" and key:
            self.owners[key][line.attempt] = who
            self.starts[who] += 1
            if line.attempt > 1:
                return f"{who} reclaimed the orphan {where}"
        elif action == "fenced" and key:
            self.fenced[key].append(who)
            return f"{who}'s late completion of {where} REFUSED: fenced by the attempt number"
        elif action == "effect_refused" and key:
            self.refused_effects[key].append(who)
            return f"{who}'s late side effect for {where} REFUSED (LeaseLost)"
        elif action == "effect_kept" and key:
            return f"{who}: {line.message.split(' ')[0]} of {where} was already done: not repeated"
        elif action == "lease_lost" and key:
            return f"{who} noticed its lease on {where} was lost"
        elif action == "reap":
            return f"{who}'s reaper: {line.message.removeprefix('reaper: ')}"
        elif action in {"hand_off", "fail"} or line.level in {"ERROR", "CRITICAL"}:
            return f"{who}: {line.message} {where}".strip()
        return None

    @property
    def fenced_completions(self) -> int:
        return sum(len(v) for v in self.fenced.values())

    @property
    def refused_effect_count(self) -> int:
        return sum(len(v) for v in self.refused_effects.values())
