"""The parallel arrays our statements unnest, written as Postgres array literals.

The claim statement takes one array per candidate field, and a busy replica sends thousands of
candidates a second. psycopg dumps a list element by element in Python (a dumper call, then
quoting, per element): that was a third of a saturated replica's CPU. Here each array is one
text literal, joined in C (`','.join(map(str, ...))`), which the statement's
`::timestamptz[]` (or `::text[]`, ...) cast parses on the server, exactly as it parsed the
literal psycopg wrote. Only text that needs it is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, cast

from ..records import Candidate

LEASE_KEYS = {"ids": "id", "fire_times": "fire_time", "attempts": "attempt",
              "lease_tokens": "lease_token"}


def literal(values: Sequence[Any]) -> str:
    """`values` (all of one type, or None) as a Postgres array literal: '{a,b,NULL}'."""
    present = [v for v in values if v is not None] if None in values else values
    if not present:
        return "{" + ",".join(["NULL"] * len(values)) + "}"
    sample = present[0]
    if isinstance(sample, str):
        return _texts(values)
    if isinstance(sample, bool):
        encode: Any = {True: "t", False: "f"}.__getitem__
    elif isinstance(sample, datetime):
        # Most fire times of one statement are the same instant (aligned schedules), and a
        # job's version repeats: each distinct one is written once (a datetime keeps its hash).
        text = {t: '"' + str(t) + '"' for t in set(present)}
        encode = text.__getitem__
    else:  # int, float, UUID: their str() is the input Postgres reads
        encode = str
    if present is values:
        return "{" + ",".join(map(encode, values)) + "}"
    return "{" + ",".join(["NULL" if v is None else encode(v) for v in values]) + "}"


def _texts(values: Sequence[str | None]) -> str:
    """Text elements, each quoted (so that 'null' stays a string); escaped when one needs it."""
    if None not in values:
        texts = cast("Sequence[str]", values)
        if "\\" not in (plain := "".join(texts)) and '"' not in plain:
            return '{"' + '","'.join(texts) + '"}'
    text = {v: "NULL" if v is None else _quoted(v) for v in set(values)}  # few reasons repeat
    return "{" + ",".join(map(text.__getitem__, values)) + "}"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def arrays(records: Sequence[Any], **paths: str) -> dict[str, str]:
    """Records as the parallel arrays our statements unnest: {parameter: array literal of each
    record's value at `path`}, a path being an attribute name, dotted for a nested one
    ("lease.id")."""
    return {name: literal(list(map(attrgetter(path), records))) for name, path in paths.items()}


def claim_params(agent_id: str, candidates: Sequence[Candidate], capacity: int) -> dict[str, Any]:
    """The parameters of the `claim` query: the candidates as parallel arrays."""
    return {
        "agent_id": agent_id,
        "capacity": capacity,
        **arrays(candidates, jobs="job_name", fire_times="fire_time", wants="want",
                 reasons="reason", latest="latest", since="since"),
    }
