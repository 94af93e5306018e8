"""What each effect form guarantees when the replica dies between the receipt and the effect.

A real process takes the receipt its way and is SIGKILLed at the worst moment; another replica
then reclaims the occurrence and runs the same code to the end. The "external system" is a table
written on its own connection, keyed by the idempotency key where the form passes one (as an
API that honours an Idempotency-Key header does)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from uuid import UUID

import pytest

from claimsched.db import Store
from claimsched.records import Lease
from claimsched.run.effects import Effects
from claimsched.run.runs import Run
from claimsched.schedule.specs import job_spec

from .support import PRESENCE, due, past, sql

# The handler body of each form. `crash()` is where the replica dies; `send(k)` is the external
# call (idempotent by `k` when one is given); `write(conn)` the app's own database write.
FORMS = {
    "at_most_once": """
        if run.at_most_once("mail"):
            crash()
            send(None)
    """,
    "effect_in_transaction": """
        with psycopg.connect(dsn) as conn:
            if run.effect("mail", conn=conn):
                write(conn)
                crash()
    """,
    "once_with_idempotency_key": """
        with run.once("mail") as first:
            if first:
                send(run.idempotency_key("mail"))
                crash()
    """,
}

HARNESS = """
import json, os, signal, sys, uuid
import psycopg
from datetime import datetime
from claimsched.db import Store
from claimsched.run.effects import Effects
from claimsched.records import Lease
from claimsched.run.runs import Run

dsn, agent, raw, will_crash = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
for name in ("fire_time", "lease_until", "started_at"):
    raw[name] = datetime.fromisoformat(raw[name])
raw["lease_token"] = uuid.UUID(raw["lease_token"])
lease = Lease(**raw)
store = Store(dsn, max_size=2)
store.open()
run = Run(lease, Effects(store.receipts, agent, lease), agent)

def crash():
    if will_crash == "yes":
        os.kill(os.getpid(), signal.SIGKILL)

def send(key):
    with psycopg.connect(dsn, autocommit=True) as ext:
        ext.execute("INSERT INTO public.external (idempotency_key) VALUES (%s)"
                    " ON CONFLICT DO NOTHING", [key])

def write(conn):
    conn.execute("INSERT INTO public.outbox DEFAULT VALUES")
"""


def _claimed(store: Store) -> Lease:
    store.schedules.upsert(job_spec(job_name="job", schedule="@every 1s", lease_seconds=30,
                                   heartbeat_seconds=10))
    sql(store.dsn, "UPDATE job_schedule SET active_since = now() - interval '1 hour'")
    _, results = store.claims.claim("a", due(store, "job", past(5)), 4)
    assert results[0].lease is not None
    return results[0].lease


def _replica(store: Store, agent: str, lease: Lease, form: str, crash: bool) -> int:
    """Run `form` in a real process as `agent`; returns its exit code (-9 when it crashed)."""
    raw = {k: (v.isoformat() if isinstance(v, datetime) else str(v) if isinstance(v, UUID)
               else v)
           for k, v in lease.__dict__.items()}
    script = HARNESS + "\n" + textwrap.dedent(FORMS[form])
    done = subprocess.run([sys.executable, "-c", script, store.dsn, agent, json.dumps(raw),
                           "yes" if crash else "no"], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode


@pytest.mark.parametrize(("form", "sent"), [
    ("at_most_once", 0),               # the receipt survived, the mail never went: lost
    ("effect_in_transaction", 1),      # write and receipt died together; attempt 2 made both
    ("once_with_idempotency_key", 1),  # attempt 2 sent again, with the same key: dropped
])
def test_a_crash_between_receipt_and_effect_gives_what_each_form_promises(
    store: Store, form: str, sent: int
) -> None:
    sql(store.dsn, "CREATE TABLE public.external (idempotency_key text UNIQUE)")
    sql(store.dsn, "CREATE TABLE public.outbox (id serial)")
    lease = _claimed(store)
    assert _replica(store, "a", lease, form, crash=True) == -signal.SIGKILL
    sql(store.dsn, "UPDATE job_runs SET lease_until = now() - interval '1 second'")
    store.claims.housekeeping("b", ["job"], PRESENCE)
    (taken,) = store.claims.reclaim("b", ["job"], 4)
    assert taken.attempt == 2
    assert _replica(store, "b", taken, form, crash=False) == 0
    effects = sql(store.dsn, "SELECT (SELECT count(*) FROM public.external)"
                             " + (SELECT count(*) FROM public.outbox)")
    assert effects == [(sent,)]
    assert sql(store.dsn, "SELECT count(*) FROM job_effects") == [(1,)]


def test_the_idempotency_key_is_the_same_in_every_attempt_and_differs_by_key(
    store: Store,
) -> None:
    lease = _claimed(store)
    first = Run(lease, Effects(store.receipts, "a", lease), "a")
    later = Run(lease.__class__(**{**lease.__dict__, "attempt": 2}),
                Effects(store.receipts, "b", lease), "b")
    assert first.idempotency_key("mail") == later.idempotency_key("mail")
    assert first.idempotency_key("mail") != first.idempotency_key("sms")
    assert first.idempotency_key("mail").startswith("claimsched-")
