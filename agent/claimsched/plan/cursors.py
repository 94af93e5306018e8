"""The planner's cursors held compactly: one 8-byte slot per job an agent has a handler for.

A cursor per job is what the planner keeps (`Planner.cursors`), one per job over a day. Here
each job's cursor is integer microseconds in an array by the job's place in the handlers'
sorted names (8 bytes a job, allocated at the first cursor; no datetime per distinct
instant); a name that is not a handler (none, in an agent) goes to a dict.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableMapping
from datetime import datetime
from typing import Any

from .handlers import Handlers
from .planner import instant, micros

NONE = -(2**63)  # no cursor (microseconds no datetime reaches)


class Cursors(MutableMapping[str, datetime]):
    """Cursors by job name, for the handlers' jobs (`Planner(cursors=Cursors(handlers))`).
    Used from the claim loop's thread only, like the planner."""

    def __init__(self, handlers: Handlers[Any]) -> None:
        self._handlers = handlers
        self._names: list[str] | None = None  # the names list the slots follow
        self._slots = array("q")
        self._count = 0
        self._others: dict[str, datetime] = {}

    def _slot(self, name: str) -> int | None:
        names, at = self._handlers.position(name)
        if names is not self._names:  # the first cursor, or (never, in an agent) new handlers
            held = list(self.items())
            self._names, self._slots = names, array("q", [NONE]) * len(names)
            self._count, self._others = 0, {}
            for key, value in held:
                self[key] = value
            names, at = self._handlers.position(name)
        return at

    def __getitem__(self, name: str) -> datetime:
        at = self._slot(name)
        if at is None:
            return self._others[name]
        us = self._slots[at]
        if us == NONE:
            raise KeyError(name)
        return instant(us)

    def __setitem__(self, name: str, value: datetime) -> None:
        at = self._slot(name)
        if at is None:
            self._others[name] = value
            return
        self._count += self._slots[at] == NONE
        self._slots[at] = micros(value)

    def __delitem__(self, name: str) -> None:
        at = self._slot(name)
        if at is None:
            del self._others[name]
            return
        if self._slots[at] == NONE:
            raise KeyError(name)
        self._slots[at] = NONE
        self._count -= 1

    def __iter__(self) -> Iterator[str]:
        if self._names is not None:
            yield from (n for n, us in zip(self._names, self._slots, strict=True) if us != NONE)
        yield from self._others

    def __len__(self) -> int:
        return self._count + len(self._others)

    def clear(self) -> None:
        self._names, self._slots, self._count, self._others = None, array("q"), 0, {}
