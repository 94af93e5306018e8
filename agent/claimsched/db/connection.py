"""Connections and pools, and the one place where psycopg errors become claimsched errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, LiteralString

import psycopg
import psycopg_pool
from psycopg import conninfo, sql
from psycopg import errors as pgerrors

from ..errors import (
    AuthenticationFailed,
    ConfigurationError,
    DatabaseAway,
    DatabaseConflict,
    DatabaseError,
    DatabaseUnavailable,
    InvalidSpec,
)
from ..settings import schema_name
from .queries import query
from .session import SessionOptions

#: A pooled connection with claimsched's settings, as a context (Store.connection).
Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]

#: Connection options whose values are secrets (libpq's own names).
SECRET_OPTIONS = frozenset({"password", "sslpassword"})
MALFORMED = "<a DSN libpq cannot parse>"


def redact_dsn(dsn: str) -> str:
    """The DSN without its secrets, fit for logs, errors and status, in every form libpq reads
    (URI with the password in the user info or a query parameter, key=value with quoted values
    and escapes): libpq's own parser finds the options, and the secrets are replaced. A DSN it
    cannot parse is never echoed (a password may be anywhere in it)."""
    try:
        options = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return MALFORMED
    return conninfo.make_conninfo(
        "", **{k: "***" if k in SECRET_OPTIONS else v for k, v in options.items()}
    )


_IN_TEXT = (
    # postgresql://user:secret@host: the user info's password
    (re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE), r"\1***@"),
    # ?password=secret&... in a URI's query
    (re.compile(r"([?&](?:ssl)?password=)[^&\s]*", re.IGNORECASE), r"\1***"),
    # password=secret, password = 'quoted \' secret' in key=value form
    (re.compile(r"\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)", re.IGNORECASE),
     r"\1***"),
)


def redact_text(text: str) -> str:
    """Free text (an error message, a log line) with every DSN secret in it replaced: URI user
    info, password query parameters and password= options, quoted or not."""
    for pattern, replacement in _IN_TEXT:
        text = pattern.sub(replacement, text)
    return text


def compose(template: LiteralString, *names: str, **literals: str) -> sql.Composed:
    """A statement that takes no parameters (DDL, COMMENT ON): each `{}` of `template` filled by
    a quoted identifier from `names`, each `{key}` by a quoted literal from `literals`."""
    values = {key: sql.Literal(value) for key, value in literals.items()}
    return sql.SQL(template).format(*map(sql.Identifier, names), **values)


def translate(exc: BaseException) -> DatabaseError | InvalidSpec:
    """The claimsched error for a psycopg error: one clear line, never a secret."""
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.ProgrammingError) and "connection info string" in text:
        # libpq's parse error quotes the DSN around the fault, a password included: not shown.
        return DatabaseUnavailable(
            "the DSN is malformed: libpq cannot parse it (quote values with spaces: "
            "password='a b'; in a URI, percent-encode reserved characters)"
        )
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return DatabaseAway(f"cannot reach the database: {text}")
    if isinstance(exc, pgerrors.InvalidPassword | pgerrors.InvalidAuthorizationSpecification):
        return AuthenticationFailed(f"the database refused the login: {text}")
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return read_only(text)
    if isinstance(exc, pgerrors.QueryCanceled):
        return DatabaseUnavailable(f"a statement ran past its statement_timeout: {text}")
    if isinstance(
        exc,
        pgerrors.DeadlockDetected | pgerrors.SerializationFailure | pgerrors.LockNotAvailable,
    ):
        return DatabaseConflict(f"retrying after a conflict with another transaction: {text}")
    if isinstance(exc, pgerrors.InvalidCatalogName):
        return DatabaseUnavailable(f"the database does not exist: {text}")
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return DatabaseError(f"permission denied: {text}")
    if isinstance(exc, pgerrors.CheckViolation | pgerrors.InvalidTextRepresentation):
        return InvalidSpec(f"the database rejected the value: {text}")
    if isinstance(exc, psycopg.OperationalError):
        if "password authentication failed" in text or "no password supplied" in text:
            return AuthenticationFailed(f"the database refused the login: {text}")
        if "session is read-only" in text or "hot standby" in text:
            return DatabaseAway(
                "no primary among the DSN's hosts: each one is a read-only standby and "
                f"target_session_attrs=read-write refuses it: {text} (a pooler such as "
                "pgbouncer repeats the parameters of its first server connection, which may be "
                "from before a failover: leave target_session_attrs out of a pooler's DSN)"
            )
        if "does not exist" in text and "database" in text:
            return DatabaseUnavailable(f"the database does not exist: {text}")
        return DatabaseAway(f"cannot reach the database: {text}")
    return DatabaseError(f"database error: {text}")


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise psycopg and pool errors as claimsched errors."""
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        raise translate(exc) from exc


def read_only(why: str) -> DatabaseAway:
    """The error for a server that refuses writes (retried: a failover may be under way)."""
    return DatabaseAway(
        f"the server is a read-only standby, not the primary: {why} (list every host of the "
        "cluster in the DSN, with target_session_attrs=read-write, or point the DSN or its "
        "pooler at the primary)"
    )


def checked_schema(schema: str) -> str:
    """The schema name, or ConfigurationError saying why Postgres cannot hold it."""
    try:
        return schema_name(schema)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def search_path(conn: psycopg.Connection[Any], schema: str) -> str:
    """claimsched's schema first, quoted: `MySchema` stays "MySchema" (not myschema)."""
    return sql.SQL("{}, public").format(sql.Identifier(schema)).as_string(conn)


def connect(
    dsn: str,
    schema: str,
    options: SessionOptions | None = None,
    *,
    autocommit: bool = True,
    timeout: float = 5.0,
    configured: bool = True,
) -> psycopg.Connection[Any]:
    """One connection, keepalives on and a primary only (a read-only server refused either
    way); with claimsched's session settings unless `configured` is false (behind a pooler they
    would not last), or a clear error."""
    options = options or SessionOptions()
    with translated():
        conn = psycopg.connect(
            dsn,
            autocommit=autocommit,
            connect_timeout=max(1, int(timeout)),
            **options.connect_kwargs(dsn),
        )
        try:
            # unconfigured: the same statement, its settings gone with its transaction; what
            # stays is its refusal of a read-only server
            configure(conn, schema, options, local=not configured)
            if not configured and not autocommit:
                conn.rollback()
        except BaseException:
            conn.close()
            raise
        return conn


def configure(
    conn: psycopg.Connection[Any], schema: str, options: SessionOptions, *, local: bool = False
) -> None:
    """claimsched's settings (sql/queries.sql's session_settings): for the session, or with
    `local` for the current transaction only (behind a pooler a session is nobody's). A server
    that refuses writes is refused, asked by the same statement."""
    row = conn.execute(
        query("session_settings"), options.settings(search_path(conn, schema), local)
    ).fetchone()
    if not local and not conn.autocommit:
        conn.commit()
    if row is None or row[-1]:
        raise read_only("transaction_read_only is on")


RECONNECT_SERIES = 4.0  # seconds of reconnection tries before the pool starts afresh


def make_pool(
    dsn: str,
    options: SessionOptions,
    configure: Callable[[psycopg.Connection[Any]], None],
    max_size: int,
    name: str,
) -> psycopg_pool.ConnectionPool[Any]:
    """A pool of autocommit connections, each set up by `configure`; opened lazily.

    psycopg_pool retries a lost connection with a delay that doubles without bound until
    `reconnect_timeout`: after a 20 s failover its next try came ~10 s after the new primary
    was up. A short one ends each series of tries early; the next request for a connection
    starts a fresh series at once, so a database that is back is found within seconds."""
    return psycopg_pool.ConnectionPool(
        dsn,
        min_size=1,
        max_size=max_size,
        kwargs={"connect_timeout": 5, **options.connect_kwargs(dsn)},
        configure=configure,
        open=False,
        name=name,
        reconnect_timeout=RECONNECT_SERIES,
    )


def dsn_parses(dsn: str) -> bool:
    """Whether libpq can parse `dsn` (its error would quote the DSN: say so in other words)."""
    try:
        conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return False
    return True
