"""The agent's job handlers by job name, held compactly: an app may register 100,000 jobs.

The names are one sorted list (which the claim loop reads: the reclaim and presence
statements send it, reads key their entries by its strings) and each one's handler a 4-byte
index into the few distinct handlers (an app registers one function for many jobs): ~12 bytes
per job besides its name, and no dict or sorted copy besides. A lookup is a bisection.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

Handler = TypeVar("Handler")


class Handlers(Mapping[str, Handler], Generic[Handler]):
    """Handlers by job name. Registrations wait in a dict until the first lookup merges them
    into the sorted list (the agent registers before it starts, and looks up after)."""

    def __init__(self) -> None:
        # The names sorted, and the handler of names[i] is _distinct[which[i]]; replaced as
        # one (a lookup on another thread sees the old pair or the new one).
        self._sorted: tuple[list[str], array[int]] = ([], array("I"))
        self._distinct: list[Handler] = []
        self._added: dict[str, Handler] = {}
        self._lock = threading.Lock()

    def add(self, name: str, handler: Handler) -> bool:
        """Register `handler` for `name`; False (and nothing changes) when it has one."""
        if name in self._added or self._find(name) is not None:
            return False
        self._added[name] = handler
        return True

    @property
    def names(self) -> list[str]:
        """The jobs, sorted (the list itself: do not change it)."""
        self._merge()
        return self._sorted[0]

    def position(self, name: str) -> tuple[list[str], int | None]:
        """The sorted names and where `name` is in them (None: not a handler)."""
        self._merge()
        names = self._sorted[0]
        return names, self._find(name, names)

    def own(self, name: str) -> str | None:
        """The registered string equal to `name` (a map keyed by it holds no copy), or None."""
        self._merge()
        names, _ = self._sorted
        found = self._find(name, names)
        return None if found is None else names[found]

    def __getitem__(self, name: str) -> Handler:
        self._merge()
        names, which = self._sorted
        found = self._find(name, names)
        if found is None:
            raise KeyError(name)
        return self._distinct[which[found]]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._added or self._find(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self._sorted[0]) + len(self._added)

    def _find(self, name: str, names: list[str] | None = None) -> int | None:
        names = self._sorted[0] if names is None else names
        at = bisect_left(names, name)
        return at if at < len(names) and names[at] == name else None

    def _merge(self) -> None:
        if not self._added:
            return
        with self._lock:
            if not self._added:
                return
            slots = {id(handler): i for i, handler in enumerate(self._distinct)}
            names, held = self._sorted
            pairs = sorted([*zip(names, (self._distinct[i] for i in held), strict=True),
                            *self._added.items()], key=lambda pair: pair[0])
            which = array("I")
            for _, handler in pairs:
                slot = slots.get(id(handler))
                if slot is None:
                    slot = slots[id(handler)] = len(self._distinct)
                    self._distinct.append(handler)
                which.append(slot)
            self._sorted = ([name for name, _ in pairs], which)
            self._added = {}
