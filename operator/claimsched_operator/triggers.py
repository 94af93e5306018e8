"""Manual runs from the `claimsched.io/trigger` annotation: one run per new value, even when the
operator dies half-way.

The run (a `job_runs` row in Postgres) and the record that it was asked for
(`status.lastTrigger` in Kubernetes) cannot be written together, so the request itself is made
idempotent. Before asking for the run, the operator writes a plan into its own annotation
`operator.claimsched.io/trigger-plan`: a digest of the trigger value and the fire time it is
going to use. The run's key is `(job_name, fire_time)`, and `request_run` inserts with
`ON CONFLICT DO NOTHING`, so whichever step a crash interrupts, the next attempt finds the plan,
asks for the same occurrence again, gets nothing new, and only then writes
`status.lastTrigger`:

- dies before the plan is stored: nothing was asked for; a new plan is made;
- dies after the plan, before the run: the run is asked for with the planned fire time;
- dies after the run, before `lastTrigger`: the same request inserts nothing.

The plan's fire time is the database clock when the value is first seen, nudged off whole
seconds so that it never takes the key of a scheduled occurrence. The plan stays after the run
(overwritten by the next value): removing it in the same write as `lastTrigger` is not atomic
(kopf patches the object and then its status), and a plan without a run is harmless."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from .models import rfc3339

TRIGGER = "claimsched.io/trigger"
PLAN = "operator.claimsched.io/trigger-plan"
LAST_TRIGGER_LENGTH = 253  # status.lastTrigger's maxLength


def digest(value: str) -> str:
    """A short stable fingerprint of a trigger value (values may be long)."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def recorded_value(value: str) -> str:
    """What status.lastTrigger holds once `value` was handled."""
    return value[:LAST_TRIGGER_LENGTH]


@dataclass(frozen=True)
class Plan:
    """The manual run that a trigger value is turned into."""

    digest: str
    fire_time: datetime

    def encode(self) -> str:
        return json.dumps({"trigger": self.digest, "fireTime": rfc3339(self.fire_time)},
                          separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> Plan | None:
        """The stored plan, or None when absent or unreadable (then a new plan is made)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            fire_time = datetime.fromisoformat(str(data["fireTime"]).replace("Z", "+00:00"))
            return cls(str(data["trigger"]), fire_time)
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def new(cls, value: str, db_now: datetime) -> Plan:
        """A plan for `value` at the database's now, never on a whole second."""
        fire_time = db_now if db_now.microsecond else db_now + timedelta(microseconds=1)
        return cls(digest(value), fire_time)


def handled(value: str, last_trigger: str | None, plan: Plan | None) -> bool:
    """Whether `value` was turned into a run and recorded already.

    A plan for the value with no matching lastTrigger means a crash in between: not handled
    (the planned request is repeated, and inserts nothing if it was made). Without any plan
    (resources handled before plans existed), lastTrigger alone decides."""
    if last_trigger != recorded_value(value):
        return False
    return plan is None or plan.digest == digest(value)
