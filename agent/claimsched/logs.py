"""Logging for operators: structured fields (job, fire_time, attempt, agent) on every line."""

from __future__ import annotations

import logging
import sys
from typing import Any

FIELDS = ("agent", "job", "fire_time", "attempt", "action")


class FieldsFormatter(logging.Formatter):
    """`time level logger message key=value ...` with the structured fields that are present."""

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extra = " ".join(
            f"{name}={getattr(record, name)}" for name in FIELDS if hasattr(record, name)
        )
        return f"{base} {extra}" if extra else base


class Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever `sys.stderr` is when a record comes, not to the stream
    it was when configured (an embedding app, or a test, may have replaced and closed that)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """logging.StreamHandler sets its stream; this one always reads sys.stderr."""


def configure(level: str = "INFO") -> None:
    """Send claimsched's logs to stderr with their fields (for the CLI and run_forever)."""
    handler = Stderr()
    handler.setFormatter(FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("claimsched")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # The pool logs every failed reconnect; the agent logs outages once per state change.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)


class AgentLog(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds the agent id (and whatever else it was given) to every record."""

    def process(self, msg: str, kwargs: Any) -> tuple[str, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs
