"""Plain-text tables and progress lines for the CLI: what people read, with no dependency."""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TextIO


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(value: Any) -> str:
    # One line per row: a newline or tab inside a value (an error message) is shown escaped.
    text = "" if value is None else str(value)
    return text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", " ")


def listing(columns: Sequence[str], rows: Sequence[dict[str, Any]], what: str,
            now: datetime, times: Sequence[str] = ()) -> str:
    """kubectl's style: an UPPERCASE header, one line per row, the `times` columns (ISO 8601
    text) as their distance from `now` ("5m ago", "in 3s"), and "No <what> found." for none."""
    if not rows:
        return f"No {what} found."
    shown = [{c: _relative(row.get(c), now) if c in times else row.get(c) for c in columns}
             for row in rows]
    cells = [[_cell(row.get(c)) for c in columns] for row in shown]
    header = [c.upper().replace("_", " ") for c in columns]
    widths = [max([_width(h), *(_width(r[i]) for r in cells)]) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        padded = (v + " " * (w - _width(v)) for v, w in zip(values, widths, strict=True))
        return "   ".join(padded).rstrip()

    return "\n".join([line(header), *(line(r) for r in cells)])


def _relative(value: Any, now: datetime) -> str | None:
    """An ISO 8601 instant as kubectl shows ages: its distance from `now`, in the two largest
    units that matter ("5m12s ago", "in 3h"); None stays None."""
    if not value:
        return None
    at = datetime.fromisoformat(str(value))
    seconds = int((now - at).total_seconds())
    text = age(abs(seconds))
    return f"in {text}" if seconds < 0 else f"{text} ago"


def age(seconds: int) -> str:
    """A duration as kubectl's HumanDuration writes it (45s, 5m12s, 3h4m, 2d5h, 400d)."""
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def render(title: str, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """A title line, a header, a rule and one line per row; columns padded to their widest."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([_width(c), *(_width(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        padded = (v + " " * (w - _width(v)) for v, w in zip(values, widths, strict=True))
        return "  ".join(padded).rstrip()

    out = [title, line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


@contextmanager
def progress(text: str, stream: TextIO | None = None) -> Iterator[None]:
    """Say what a slow step is doing, on a terminal only (scripts see nothing)."""
    out = stream or sys.stderr
    if not out.isatty():
        yield
        return
    out.write(f"{text}…")
    out.flush()
    try:
        yield
    finally:
        out.write(" done\n")
        out.flush()


class StatusLine:
    """One line of progress rewritten in place, on a terminal only (scripts see nothing); a
    context manager that ends the line when the step is over."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stderr
        self._live = self._out.isatty()
        self._shown = 0  # width of the text on the line now

    def show(self, text: str) -> None:
        if not self._live:
            return
        pad = " " * max(0, self._shown - _width(text))
        self._out.write(f"\r{text}{pad}")
        self._out.flush()
        self._shown = _width(text)

    def __enter__(self) -> StatusLine:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live and self._shown:
            self._out.write("\n")
            self._out.flush()
