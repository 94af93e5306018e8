"""The read-only web view's door to the database (sql/views.sql): SELECT only, a fixed number
of statements per page whatever the number of schedules, and a count of what it sent."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from psycopg import errors as pgerrors
from psycopg.rows import dict_row

from ..errors import DatabaseError
from .queries import query
from .store import Store

RECENT_RUNS = 30  # runs per schedule on the overview
EFFECTS_SHOWN = 100  # effect receipts listed on a run's page


class Views:
    """Named SELECTs on the store's pool; `statements` counts every one sent (all threads)."""

    def __init__(self, store: Store, *, timeout: float = 5.0) -> None:
        self.store = store
        self.timeout = timeout
        self.statements = 0
        self._lock = threading.Lock()

    def schedules(self, job_name: str | None = None) -> list[dict[str, Any]]:
        """Every schedule (or one), each with its newest runs as arrays, newest first: the
        columns of sql/views.sql's web_schedules, in one statement."""
        return self._rows("web_schedules", {"job_name": job_name, "recent": RECENT_RUNS})

    def schedule_runs(self, job_name: str, since: datetime, limit: int) -> list[dict[str, Any]]:
        """One job's runs after `since`, newest first, at most `limit`."""
        params = {"job_name": job_name, "since": since, "limit": limit}
        return self._rows("web_schedule_runs", params)

    def run(self, run_id: int) -> dict[str, Any] | None:
        """One run with its effect receipts, or None when no run has this id."""
        rows = self._rows("web_run", {"run_id": run_id, "effects": EFFECTS_SHOWN})
        return rows[0] if rows else None

    def agents(self) -> list[dict[str, Any]]:
        """Agents seen recently, newest first, whether each is alive, and the clock."""
        return self._rows("web_agents", {})

    def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            self.statements += 1
        try:
            with self.store.connection(self.timeout) as conn, \
                    conn.cursor(row_factory=dict_row) as cur:
                return list(cur.execute(query(name), params))
        except DatabaseError as exc:
            if isinstance(exc.__cause__, pgerrors.UndefinedTable):
                self.store.admin.check_version()  # says which schemas hold claimsched's tables
            raise
