"""One Store (connection pool) per database: the default DSN, or a Secret named by
spec.databaseRef. Migrations run on a database's first use, maintenance every interval.

Databases are told apart by DSN: two Secrets (or a Secret and the default) holding the same DSN
share one Store, known by the name it was first opened under ("default" or
"secret:<namespace>/<name>/<key>")."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import threading
import time
from dataclasses import asdict, dataclass, field

from claimsched.db import OwnedSchedules, Store, dsn_parses, redact_dsn
from claimsched.errors import DatabaseError, DatabaseUnavailable, InvalidSpec

from .kubeapi import KubeApi, KubeApiError
from .models import DatabaseRef

log = logging.getLogger("claimsched.operator.databases")

DEFAULT = "default"


class InvalidDatabaseRef(InvalidSpec):
    """spec.databaseRef names no DSN the operator can use (no such Secret or key, not a DSN).
    The message names the Secret and key, never the value."""


class DatabaseUnreachable(DatabaseUnavailable):
    """The Secret of spec.databaseRef cannot be read, or its database cannot be reached. The
    message names the Secret and key, never the driver's text (it may quote the DSN)."""


def secret_key(namespace: str, ref: DatabaseRef) -> str:
    """The name of the database held by a databaseRef (until another name holds its DSN)."""
    return f"secret:{namespace}/{ref.name}/{ref.key}"


def database_fingerprint(system_identifier: str, database: str, schema: str) -> str:
    """Which database (and schema) a row is in, as the status shows it: a hash of the cluster's
    system identifier, the database's name and the schema, the same through any DSN (a new
    password, another host name) and never a credential."""
    text = "\0".join((system_identifier, database, schema))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _named(namespace: str, ref: DatabaseRef) -> str:
    return f"Secret {namespace}/{ref.name} key {ref.key!r}"


async def read_secret_dsn(kube: KubeApi, namespace: str, ref: DatabaseRef) -> str:
    """The DSN held by the Secret (GET with the operator's own credentials)."""
    named = _named(namespace, ref)
    try:
        secret = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{ref.name}")
    except KubeApiError as exc:
        if exc.status == 404:
            raise InvalidDatabaseRef(f"{named}: the Secret does not exist") from None
        raise DatabaseUnreachable(
            f"{named}: cannot read the Secret (HTTP {exc.status or 'error'})") from None
    data = secret.get("data") or {}
    if ref.key not in data:
        raise InvalidDatabaseRef(f"{named}: the Secret has no such key")
    try:
        dsn = base64.b64decode(data[ref.key], validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidDatabaseRef(f"{named}: the value is not text") from None
    if not dsn:
        raise InvalidDatabaseRef(f"{named}: the value is empty")
    if not dsn_parses(dsn):
        raise InvalidDatabaseRef(f"{named}: the value is not a DSN libpq can parse")
    return dsn


def open_secret_database(databases: Databases, namespace: str, ref: DatabaseRef,
                         dsn: str) -> Database:
    """The database of a Secret's DSN (blocking); a failure says which Secret, in fixed words."""
    try:
        return databases.get(secret_key(namespace, ref), dsn)
    except DatabaseError:
        raise DatabaseUnreachable(
            f"{_named(namespace, ref)}: cannot connect to the database it names") from None


@dataclass
class Database:
    name: str
    store: Store
    owned: OwnedSchedules  # the operator's statements on `store`
    fingerprint: str  # database_fingerprint: which database this is, whatever the DSN
    maintained_at: float = field(default=0.0)


class Databases:
    """The databases the operator manages. Thread-safe; opening and migrating block."""

    def __init__(self, schema: str, default_dsn: str | None) -> None:
        self.schema = schema
        self.default_dsn = default_dsn
        self._lock = threading.Lock()
        self._by_dsn: dict[str, Database] = {}
        self._dsn_of: dict[str, str] = {}  # every name a database was asked for -> its DSN
        self._reached: dict[str, str] = {}  # every fingerprint opened -> the latest DSN to it

    def get(self, key: str, dsn: str | None = None) -> Database:
        """The database of `key` (DEFAULT, or a Secret's key with the DSN it holds), opened and
        migrated on first use; a DSN already open is shared under its first name."""
        dsn = dsn or (self.default_dsn if key == DEFAULT else None)
        if not dsn:
            raise DatabaseUnavailable("no database: set CLAIMSCHED_DSN or spec.databaseRef")
        with self._lock:
            known = self._by_dsn.get(dsn)
            if known is None:
                known = self._open(key, dsn)
            previous = self._dsn_of.get(key)
            self._dsn_of[key] = dsn
            if previous is not None and previous != dsn and previous not in self._dsn_of.values():
                gone = self._by_dsn.pop(previous, None)
                if gone is not None:
                    gone.store.close()
            return known

    def _open(self, key: str, dsn: str) -> Database:
        store = Store(dsn, schema=self.schema, max_size=4, name=f"operator-{key}")
        owned = OwnedSchedules(store)
        try:
            store.open()
            applied = store.admin.migrate()
            fingerprint = database_fingerprint(*owned.database(), self.schema)
        except Exception:
            store.close()
            raise
        log.info("database %s ready (%s, fingerprint %s), migrations applied: %s",
                 key, redact_dsn(dsn), fingerprint, applied or "none",
                 extra={"action": "database_open", "database": key})
        database = self._by_dsn[dsn] = Database(key, store, owned, fingerprint)
        self._reached[fingerprint] = dsn
        return database

    def reaches(self, fingerprint: str) -> bool:
        """Whether this process has a DSN for the database of `fingerprint` (one opened since
        it started: the default, or one a Secret named)."""
        with self._lock:
            return fingerprint in self._reached

    def release_in(self, fingerprint: str, owner: str) -> str | None:
        """Release `owner`'s row in the database of `fingerprint` (blocking; opened for this
        alone when no longer in use): the job released, if any. A database this process has
        no DSN for, or cannot reach, raises DatabaseUnreachable in fixed words. The default
        database is opened to learn its fingerprint when no other has it."""
        with self._lock:
            dsn = self._reached.get(fingerprint)
            unopened = self.default_dsn is not None and self.default_dsn not in self._by_dsn
        if dsn is None and unopened:
            try:
                if self.get(DEFAULT).fingerprint == fingerprint:
                    dsn = self.default_dsn
            except DatabaseError:
                pass  # said below: not known
        with self._lock:
            known = self._by_dsn.get(dsn) if dsn is not None else None
        if known is not None:
            return known.owned.release(owner)
        if dsn is None:
            raise DatabaseUnreachable(f"no DSN of database {fingerprint} is known to this "
                                      "operator")
        store = Store(dsn, schema=self.schema, max_size=1, name="operator-release")
        try:
            store.open()
            return OwnedSchedules(store).release(owner)
        except DatabaseError:
            raise DatabaseUnreachable(f"cannot reach database {fingerprint}") from None
        finally:
            store.close()

    def dsn_of(self, key: str) -> str | None:
        """The DSN the database `key` was last asked for with."""
        with self._lock:
            return self._dsn_of.get(key)

    def existing(self, name: str) -> Database | None:
        """An open database, by its name."""
        with self._lock:
            for database in self._by_dsn.values():
                if database.name == name:
                    return database
            return None

    def maintain_due(self, interval: float, retention_days: int) -> None:
        """Run maintenance on every database whose last run is older than `interval` seconds."""
        with self._lock:
            databases = list(self._by_dsn.values())
        for db in databases:
            if db.maintained_at and time.monotonic() - db.maintained_at < interval:
                continue
            try:
                result = db.store.admin.maintain(retention_days)
            except Exception as exc:
                log.warning("maintenance of database %s failed: %s", db.name, exc,
                            extra={"action": "maintain", "database": db.name})
                continue
            db.maintained_at = time.monotonic()
            log.info("maintenance of database %s: %s", db.name, asdict(result),
                     extra={"action": "maintain", "database": db.name})

    def close(self) -> None:
        with self._lock:
            for db in self._by_dsn.values():
                db.store.close()
            self._by_dsn.clear()
            self._dsn_of.clear()
