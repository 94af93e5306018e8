"""What the agent asks of the C allocator, so that a replica's memory follows what it holds.

With 100,000 schedules the agent's large blocks (the tables of dicts and sets of every name,
the lists of a full read and of the first planner pass) are freed soon after they are made.
glibc's malloc raises its mmap threshold to the size of each large block freed, so the next
ones come from the heap, where freed memory stays in the process. Both calls are no-ops
where the C library is not glibc (musl, macOS).
"""

from __future__ import annotations

import ctypes
import os
import platform

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
LARGE_BLOCK = 128 * 1024  # bytes: glibc's default threshold, kept fixed
# Set in the environment, the process's own choice stands.
_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


_LIBC = _glibc()


def keep_large_blocks_apart() -> None:
    """Large blocks from their own mappings (given back to the OS when freed), always."""
    if _LIBC is not None and _THRESHOLD_ENV not in os.environ:
        _LIBC.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK)


def release_freed() -> None:
    """Give the heap's free pages back to the OS (after a read or pass that freed much)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
