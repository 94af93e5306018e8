"""Which IANA time zone database this process computes fire times with.

Two versions can map one local time to two UTC instants (a zone's rules changed), and replicas
that disagree would each claim their own instant: agents report this version, and
`claimsched agents` warns when live agents disagree.
"""

from __future__ import annotations

import importlib.util
import os
import zoneinfo
from functools import cache


@cache
def tzdata_version() -> str:
    """The version zoneinfo reads zones from: the first folder of its search path that holds
    zone files (the system's, `tzdata.zi` names the version), else the `tzdata` package."""
    for folder in zoneinfo.TZPATH:
        if os.path.isfile(os.path.join(folder, "UTC")):
            return _version_line(os.path.join(folder, "tzdata.zi")) or f"system ({folder})"
    if importlib.util.find_spec("tzdata") is not None:
        import tzdata

        return f"{tzdata.IANA_VERSION} (the tzdata package)"
    return "unknown"


def _version_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as text:
            first = text.readline().split()
    except OSError:
        return None
    return first[2] if first[:2] == ["#", "version"] and len(first) > 2 else None
