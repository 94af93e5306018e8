"""Waiting on a condition with a deadline: the one poll helper of every test (and what it polls)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None],
    what: str = "a condition",
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    log: Path | Callable[[], str] | None = None,
) -> T:
    """Poll `probe` until it answers something truthy and return that; at the deadline fail the
    test naming `what`, with the tail of `log` (a file, or a function returning the text)."""
    __tracebackhide__ = True
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            tail = ""
            if log is not None:
                text = log.read_text(errors="replace") if isinstance(log, Path) else log()
                tail = f"\n{text[-6000:]}"
            pytest.fail(f"timed out after {timeout}s waiting for {what}{tail}")
        time.sleep(interval)


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """Whether GET `url` answers 200 now (a refused or slow connection is a no, not an error)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except OSError:
        return False
