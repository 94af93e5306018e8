"""The pooler tests' pgbouncer (bench/ha/pgbouncer.py): a missing binary fails the test with
what to install, it does not skip."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from bench.ha.pgbouncer import MissingPgbouncer, Pgbouncer

__all__ = ["Pgbouncer", "pgbouncer"]


@contextlib.contextmanager
def pgbouncer(
    server_dsn: str, pool_mode: str = "transaction", pool_size: int = 4
) -> Iterator[Pgbouncer]:
    """A started pgbouncer in `pool_mode` for every database of the server behind `server_dsn`."""
    try:
        bouncer = Pgbouncer(server_dsn, pool_mode, pool_size)
    except MissingPgbouncer as exc:
        pytest.fail(str(exc))
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.remove()
