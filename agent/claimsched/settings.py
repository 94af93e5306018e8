"""Agent settings: every field documented with its unit and default, readable from CLAIMSCHED_*.

Plain Python on purpose: an agent replica should not pay pydantic's memory for thirteen fields.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import ConfigurationError

MAX_IDENTIFIER_BYTES = 63  # Postgres truncates longer names (NAMEDATALEN - 1)
ENV_PREFIX = "CLAIMSCHED_"
TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class SecretStr:
    """A string that repr, str and logs show as '**********'; get_secret_value() reveals it."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str) -> None:
        self._secret = secret

    def get_secret_value(self) -> str:
        return self._secret

    def __repr__(self) -> str:
        return "SecretStr('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretStr) and other._secret == self._secret

    def __hash__(self) -> int:
        return hash(self._secret)


def schema_name(value: str) -> str:
    """`value` if Postgres can hold claimsched's tables in a schema of that exact name, else
    ValueError saying why. Any other name is fine: it is always quoted (psycopg.sql.Identifier)
    where it meets SQL, so `MySchema` means "MySchema", not myschema."""
    if not value:
        raise ValueError("invalid schema name '': it is empty")
    if "\x00" in value:
        raise ValueError(f"invalid schema name {value!r}: it contains a NUL byte")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"invalid schema name {value!r}: it is not valid UTF-8") from None
    if size > MAX_IDENTIFIER_BYTES:
        raise ValueError(
            f"invalid schema name {value!r}: longer than {MAX_IDENTIFIER_BYTES} bytes"
        )
    if value.startswith("pg_"):
        raise ValueError(f"invalid schema name {value!r}: the prefix pg_ is reserved")
    return value


@dataclass(frozen=True)
class Setting:
    """One setting: its type, default and bounds, and the description --help and the README show."""

    kind: type[bool | int | float | str | SecretStr]
    default: Any  # None makes the setting optional
    description: str
    alias: str | None = None  # the environment variable, when it is not CLAIMSCHED_<NAME>
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    check: Callable[[Any], object] | None = None  # raises ValueError for a bad value

    def convert(self, value: Any) -> Any:
        """The value as this setting's type (strings parsed), or ValueError saying why not."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError("is required")
        if self.kind is bool:
            return _boolean(value)
        if self.kind is int or self.kind is float:
            return self._bounded(_number(self.kind, value))
        if not isinstance(value, str | SecretStr):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        if self.kind is SecretStr:
            return value if isinstance(value, SecretStr) else SecretStr(value)
        if isinstance(value, SecretStr):
            raise ValueError("expected a string, got a secret")
        if self.check is not None:
            self.check(value)
        return value

    def _bounded(self, number: float) -> float:
        if self.ge is not None and number < self.ge:
            raise ValueError(f"must be at least {self.ge:g}, got {number!r}")
        if self.gt is not None and number <= self.gt:
            raise ValueError(f"must be more than {self.gt:g}, got {number!r}")
        if self.le is not None and number > self.le:
            raise ValueError(f"must be at most {self.le:g}, got {number!r}")
        return number


def seconds(default: float, text: str, *, positive: bool = False, ge: float = 0.0) -> Setting:
    """A duration: at least `ge` (never negative), more than 0 if `positive`. Its description
    says the unit and the default, once, here."""
    return Setting(float, default, f"{text} Seconds; default {default:g}.",
                   ge=None if positive else ge, gt=0.0 if positive else None)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    raise ValueError(f"expected true or false (yes/no, 1/0, on/off), got {value!r}")


def _number(kind: type[Any], value: Any) -> Any:
    """An int or a float (a bool is neither); strings, as the environment holds, are parsed."""
    wanted = "an integer" if kind is int else "a number"
    if isinstance(value, str):
        try:
            value = kind(value.strip())
        except ValueError:
            raise ValueError(f"expected {wanted}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected {wanted}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"expected {wanted}, got {value!r}")
        return int(value)
    return float(value)


@dataclass(frozen=True, init=False)
class AgentSettings:
    """How an agent connects and behaves. Environment: CLAIMSCHED_<FIELD> (upper case).

    Keyword arguments win over the environment, which wins over the defaults. Invalid values
    raise ConfigurationError naming every bad field ("field: problem; field2: problem").
    """

    fields: ClassVar[dict[str, Setting]] = {
        "dsn": Setting(
            SecretStr, None, "PostgreSQL connection string (libpq URI or key=value). Required."
        ),
        "listen_dsn": Setting(
            SecretStr,
            None,
            "Direct PostgreSQL connection for LISTEN when CLAIMSCHED_DSN goes through a pooler "
            "(pgbouncer; refused if it is a pooler too). Default: none (LISTEN on "
            "CLAIMSCHED_DSN; an agent behind a pooler without it polls).",
        ),
        "poll_seconds": seconds(
            1.0, "Behind a pooler without listen_dsn: how often to poll for schedule changes and "
            "runs wanting an owner (one cheap indexed statement: 1 statement/s per idle agent at "
            "the default).", positive=True
        ),
        "statement_timeout_seconds": seconds(
            30.0, "statement_timeout of every agent statement (0: off); keep it shorter than the "
            "shortest lease."
        ),
        "lock_timeout_seconds": seconds(
            10.0, "lock_timeout of every agent statement (0: off)."
        ),
        "idle_in_transaction_timeout_seconds": seconds(
            60.0,
            "idle_in_transaction_session_timeout of claimsched's connections (0: off): the "
            "server ends a transaction left open by a frozen or partitioned agent, so its locks "
            "do not hold up the replica that took over (a receipt's transaction, run.once(), is "
            "bounded by its run's lease instead).",
        ),
        "tcp_keepalive_seconds": seconds(
            10.0, "TCP keepalive idle time; probes every half of it, three of them, and "
            "tcp_user_timeout the same span (25 s at the default): a silent peer is given up, no "
            "call hangs on it. A DSN's own keepalives* / tcp_user_timeout win.",
            ge=1,
        ),
        "schema_name": Setting(
            str,
            "claimsched",
            "Postgres schema holding claimsched's tables. Default: claimsched.",
            alias="CLAIMSCHED_SCHEMA",
            check=schema_name,
        ),
        "agent_id": Setting(
            str, None, "Unique id of this agent. Default: <hostname>-<pid>-<random>."
        ),
        "max_concurrency": Setting(
            int, 16, "Runs this agent executes at once (worker slots); a claim proposes about "
            "twice the free slots. Default 16.", ge=1, le=1000
        ),
        "migrate": Setting(
            bool, True, "Apply pending migrations at start (needs DDL rights; set false for the "
            "claimsched_agent role of `claimsched roles`). Default true."
        ),
        "housekeeping_seconds": seconds(
            30.0,
            "Presence refresh and reaper period (the reaper also runs when a lease another agent "
            "holds on a run of this agent's jobs ends).",
            positive=True,
        ),
        "jitter_seconds": seconds(
            0.02, "Random delay added to each wake-up while no peers take turns."
        ),
        "handoff_seconds": seconds(
            0.25, "How long replicas leave an occurrence to its first claimer (the peer whose "
            "turn it is); 0: every replica claims it at once."
        ),
        "shutdown_grace_seconds": seconds(
            20.0, "On SIGTERM, how long running handlers may finish before they are handed off."
        ),
        "start_timeout_seconds": seconds(
            60.0, "At start, how long to keep trying a database that cannot be reached (down, "
            "restarting, failing over, no primary yet), pausing 0.5 s doubling to 8 s, each try "
            "logged; a wrong password or a database that does not exist fails at once (0: fail "
            "at once)."
        ),
        "retry_backoff_seconds": seconds(
            2.0, "First retry delay after a handler failure; it doubles each attempt, up to 300.",
            positive=True
        ),
        "misfire_grace_seconds": seconds(
            10.0, "With catchUpPolicy None: how late an occurrence may still start."
        ),
        "schedule_refresh_seconds": seconds(
            300.0, "Re-read schedules at least this often (besides NOTIFY).", positive=True
        ),
        "metrics_port": Setting(
            int, None, "Serve Prometheus metrics on this port. Default off.", ge=0, le=65535
        ),
        "log_level": Setting(str, "INFO", "Log level of the claimsched loggers. Default INFO."),
    }

    dsn: SecretStr | None
    listen_dsn: SecretStr | None
    poll_seconds: float
    statement_timeout_seconds: float
    lock_timeout_seconds: float
    idle_in_transaction_timeout_seconds: float
    tcp_keepalive_seconds: float
    schema_name: str
    agent_id: str | None
    max_concurrency: int
    migrate: bool
    housekeeping_seconds: float
    jitter_seconds: float
    handoff_seconds: float
    shutdown_grace_seconds: float
    start_timeout_seconds: float
    retry_backoff_seconds: float
    misfire_grace_seconds: float
    schedule_refresh_seconds: float
    metrics_port: int | None
    log_level: str

    def __init__(self, **values: Any) -> None:
        aliases = {s.alias: name for name, s in self.fields.items() if s.alias}
        given = {aliases.get(key, key): value for key, value in values.items()}
        unknown = sorted(set(given) - set(self.fields))
        if unknown:
            raise ConfigurationError(f"unknown setting(s): {', '.join(unknown)}")
        environ = {key.upper(): value for key, value in os.environ.items()}
        problems = []
        for name, setting in self.fields.items():
            if name in given:
                raw = given[name]
            else:
                raw = environ.get(setting.alias or ENV_PREFIX + name.upper(), setting.default)
            try:
                object.__setattr__(self, name, setting.convert(raw))
            except ValueError as exc:
                problems.append(f"{name}: {exc}")
        if problems:
            raise ConfigurationError("; ".join(problems))

    def as_dict(self) -> dict[str, Any]:
        """Every setting by name (the dsn stays a SecretStr); AgentSettings(**it) is equal."""
        return {name: getattr(self, name) for name in self.fields}
