"""One Store (connection pool) per database: the default DSN, or a Secret named by
spec.databaseRef. Migrations run on a database's first use, maintenance every interval."""

from __future__ import annotations

import base64
import logging
import threading
import time
from dataclasses import dataclass, field

import kopf
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import errors as kopf_errors

from claimsched.db import Store, redact_dsn
from claimsched.errors import DatabaseUnavailable

from .models import DatabaseRef

log = logging.getLogger("claimsched.operator.databases")

DEFAULT = "default"


def secret_key(namespace: str, ref: DatabaseRef) -> str:
    """The key of the database named by a databaseRef."""
    return f"secret:{namespace}/{ref.name}/{ref.key}"


async def read_secret_dsn(
    namespace: str, ref: DatabaseRef, settings: kopf.OperatorSettings, logger: kopf.Logger
) -> str:
    """The DSN held by the Secret (GET through kopf's authenticated client)."""
    url = f"/api/v1/namespaces/{namespace}/secrets/{ref.name}"
    try:
        secret = await kopf_api.get(url, settings=settings, logger=logger)
    except kopf_errors.APINotFoundError:
        raise DatabaseUnavailable(f"Secret {namespace}/{ref.name} not found") from None
    except kopf_errors.APIError as exc:
        raise DatabaseUnavailable(f"cannot read Secret {namespace}/{ref.name}: {exc}") from None
    data = (secret or {}).get("data") or {}
    if ref.key not in data:
        raise DatabaseUnavailable(f"Secret {namespace}/{ref.name} has no key {ref.key!r}")
    return base64.b64decode(data[ref.key]).decode().strip()


@dataclass
class Database:
    key: str
    store: Store
    dsn: str
    maintained_at: float = field(default=0.0)


class Databases:
    """The databases the operator manages. Thread-safe; opening and migrating block."""

    def __init__(self, schema: str, default_dsn: str | None) -> None:
        self.schema = schema
        self.default_dsn = default_dsn
        self._lock = threading.Lock()
        self._open: dict[str, Database] = {}

    def get(self, key: str, dsn: str | None = None) -> Store:
        """The Store of a database, opened and migrated on first use (or when its DSN changed)."""
        dsn = dsn or (self.default_dsn if key == DEFAULT else None)
        if not dsn:
            raise DatabaseUnavailable(
                "no database: set CLAIMSCHED_DSN or spec.databaseRef"
            )
        with self._lock:
            known = self._open.get(key)
            if known is not None and known.dsn == dsn:
                return known.store
            store = Store(dsn, schema=self.schema, max_size=4, name=f"operator-{key}")
            try:
                store.open()
                applied = store.migrate()
            except Exception:
                store.close()
                raise
            log.info("database %s ready (%s), migrations applied: %s",
                     key, redact_dsn(dsn), applied or "none",
                     extra={"action": "database_open", "database": key})
            if known is not None:
                known.store.close()
            self._open[key] = Database(key, store, dsn)
            return store

    def existing(self, key: str) -> Store | None:
        with self._lock:
            known = self._open.get(key)
            return known.store if known else None

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._open)

    def maintain_due(self, interval: float, retention_days: int) -> None:
        """Run maintenance on every database whose last run is older than `interval` seconds."""
        for key in self.keys():
            with self._lock:
                db = self._open.get(key)
            if db is None or (db.maintained_at and time.monotonic() - db.maintained_at < interval):
                continue
            try:
                result = db.store.maintain(retention_days)
            except Exception as exc:
                log.warning("maintenance of database %s failed: %s", key, exc,
                            extra={"action": "maintain", "database": key})
                continue
            db.maintained_at = time.monotonic()
            log.info("maintenance of database %s: %s", key, result,
                     extra={"action": "maintain", "database": key})

    def close(self) -> None:
        with self._lock:
            for db in self._open.values():
                db.store.close()
            self._open.clear()
