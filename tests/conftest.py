"""Shared fixtures: a real PostgreSQL server per session, a fresh database per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from claimsched.db import Store
from claimsched.tools.postgres import TemporaryPostgres

_counter = itertools.count()


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """DSN of a maintenance database on a real server: CLAIMSCHED_TEST_DSN, or a throwaway one."""
    if os.environ.get("CLAIMSCHED_TEST_DSN"):
        yield os.environ["CLAIMSCHED_TEST_DSN"]
        return
    with TemporaryPostgres() as pg:
        yield pg.dsn


@pytest.fixture(scope="session")
def template_db(server_dsn: str) -> str:
    """A database with claimsched migrated, cloned for every test."""
    name = f"claimsched_tmpl_{os.getpid()}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    store = Store(_with_db(server_dsn, name))
    store.admin.migrate()
    return name


def _with_db(dsn: str, database: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, dbname=database)


@contextmanager
def _database(server_dsn: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A new database on the test server, dropped afterwards; yields its DSN."""
    name = f"{prefix}_{os.getpid()}_{next(_counter)}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        create = sql.SQL("{} TEMPLATE {}").format(create, sql.Identifier(template))
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield _with_db(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def dsn(server_dsn: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test."""
    with _database(server_dsn, "t", template_db) as fresh:
        yield fresh


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database without claimsched's schema."""
    with _database(server_dsn, "e") as fresh:
        yield fresh


@pytest.fixture
def other_empty_dsn(server_dsn: str) -> Iterator[str]:
    """A second fresh database without claimsched's schema."""
    with _database(server_dsn, "o") as fresh:
        yield fresh


@pytest.fixture
def store(dsn: str) -> Iterator[Store]:
    s = Store(dsn)
    s.open()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_threads_left_behind() -> Iterator[None]:
    """A test that leaves claimsched's background threads running fails."""
    import threading
    import time

    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 8
    while True:
        left = [
            t
            for t in threading.enumerate()
            if t not in before and t.name.startswith("claimsched-") and t.is_alive()
        ]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"threads left behind: {[t.name for t in left]}"


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """A command that configures claimsched's logging (claimsched.logs.configure: `web`,
    `agent`) changes it for the whole process; the next test starts from what it was."""
    import logging

    logger = logging.getLogger("claimsched")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
