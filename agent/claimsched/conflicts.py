"""A statement that lost a deadlock or a serialization conflict, run again."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import DatabaseConflict

T = TypeVar("T")

CONFLICT_RETRY = 0.02  # seconds before retrying a statement that lost a deadlock
CONFLICT_TRIES = 8  # a step that keeps losing deadlocks this often is reported, not retried


def retry_conflicts(step: Callable[[], T], tries: int = CONFLICT_TRIES) -> T:
    """Run `step` (one transaction or statement); when it loses a deadlock or a serialization
    conflict, which rolled it back whole, run it again after a short random pause."""
    for left in range(tries - 1, -1, -1):
        try:
            return step()
        except DatabaseConflict:
            if not left:
                raise
            time.sleep(random.uniform(CONFLICT_RETRY, 5 * CONFLICT_RETRY))
    raise AssertionError("unreachable")
