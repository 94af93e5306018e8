"""The exceptions claimsched raises. Each docstring is the default message."""

from __future__ import annotations


class ClaimschedError(Exception):
    """claimsched failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class InvalidSchedule(ClaimschedError, ValueError):
    """The schedule expression is not valid."""

    def __init__(self, message: str | None = None, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownTimeZone(ClaimschedError, ValueError):
    """The time zone is not a known IANA time zone name."""


class InvalidSpec(ClaimschedError, ValueError):
    """The job specification is not valid."""


class UnknownJob(ClaimschedError, LookupError):
    """No schedule exists for this job."""


class ConfigurationError(ClaimschedError):
    """The agent is not configured correctly."""


class DatabaseError(ClaimschedError):
    """The database refused the request."""


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached."""


class DatabaseAway(DatabaseUnavailable):
    """The database cannot be reached now (down, restarting, failing over, or no primary yet):
    worth trying again, unlike a wrong password or a database that does not exist."""


class DatabaseConflict(DatabaseError):
    """A concurrent transaction got in the way (deadlock or serialization failure): retry."""


class AuthenticationFailed(DatabaseError):
    """The database refused the credentials (user or password)."""


class SchemaMismatch(DatabaseError):
    """The database schema version does not match this version of claimsched."""


class LeaseLost(ClaimschedError):
    """This run's lease was lost: another replica owns the occurrence now, or it was fenced out."""
