"""No secret in what claimsched prints: every DSN form libpq reads, and libpq's own errors."""

from __future__ import annotations

import psycopg
import pytest

from claimsched.db import redact_dsn, redact_text
from claimsched.db.connection import translate

SECRET = "Hush7xQ"

SHAPES = [
    f"postgresql://app:{SECRET}@db/app",
    f"postgres://app:{SECRET}@db:5432,db2:5432/app?target_session_attrs=read-write",
    f"postgresql://app@db/app?password={SECRET}&sslmode=require",
    f"postgresql://app:{SECRET}%40x@db/app",
    f"host=db user=app password={SECRET} dbname=app",
    f"host=db user=app password = {SECRET}",
    f"host=db password='{SECRET} horse battery' dbname=app",
    f"host=db password='{SECRET}\\' staple' dbname=app",
    f"host=db sslpassword={SECRET} sslkey=/k",
    f"host=db password={SECRET} horse battery",          # unquoted spaces: libpq cannot parse
    f"postgresql://app:{SECRET}@db/app?port=zz",
    f"host=db password='{SECRET}",                       # an unterminated quote
    f"{SECRET}",                                         # a password pasted as the DSN
]


@pytest.mark.parametrize("dsn", SHAPES)
def test_a_redacted_dsn_never_shows_its_secret(dsn: str) -> None:
    shown = redact_dsn(dsn)
    assert SECRET not in shown
    assert "Hush" not in shown


@pytest.mark.parametrize("dsn", SHAPES)
def test_a_dsn_libpq_cannot_use_gives_an_error_without_its_secret(dsn: str) -> None:
    try:
        psycopg.connect(dsn, connect_timeout=1).close()
    except psycopg.Error as exc:
        error = str(translate(exc))
    else:
        pytest.fail("a connection succeeded")
    assert SECRET not in error and "horse" not in error and "staple" not in error, error


def test_a_redacted_dsn_keeps_what_helps_find_the_database() -> None:
    shown = redact_dsn(f"postgresql://app:{SECRET}@db:6432/shop?sslmode=require")
    for kept in ("user=app", "host=db", "port=6432", "dbname=shop", "sslmode=require"):
        assert kept in shown


@pytest.mark.parametrize("text", [
    f"could not connect with postgresql://app:{SECRET}@db/app: refused",
    f"retry failed (postgresql://app@db/app?sslmode=require&password={SECRET})",
    f"bad conninfo host=db password={SECRET} dbname=app",
    f"bad conninfo host=db password='{SECRET} with spaces' dbname=app",
    f"PASSWORD = {SECRET}",
])
def test_free_text_loses_every_dsn_secret_and_keeps_the_rest(text: str) -> None:
    shown = redact_text(text)
    assert SECRET not in shown and "***" in shown
    assert shown.split()[0] == text.split()[0]
