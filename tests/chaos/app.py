"""The app the process tests run: an Agent whose jobs come from APP_JOBS (JSON).

Each job's handler records that it started (public.starts), optionally records the effect
`before`, sleeps `sleep` seconds, then records the effect `after`. Effects go through
`run.effect(key, conn=...)` in the same transaction as a row in public.ledger, so the ledger
holds exactly the side effects that really happened.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psycopg

from claimsched import Agent, Run

DSN = os.environ["CLAIMSCHED_DSN"]

agent = Agent()


def _effect(run: Run, key: str) -> None:
    with psycopg.connect(DSN) as conn:
        if run.effect(key, conn=conn):
            conn.execute(
                "INSERT INTO public.ledger VALUES (%s, %s, %s, %s, %s)",
                [run.job_name, run.fire_time, key, run.agent_id, run.attempt],
            )


def _handler(spec: dict[str, Any]) -> Any:
    def handle(run: Run) -> None:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO public.starts (job, fire_time, agent, attempt) "
                "VALUES (%s, %s, %s, %s)",
                [run.job_name, run.fire_time, run.agent_id, run.attempt],
            )
        if spec.get("before"):
            _effect(run, spec["before"])
        time.sleep(float(spec.get("sleep", 0)))
        if spec.get("fail"):
            raise RuntimeError("the handler failed on purpose")
        if spec.get("after"):
            _effect(run, spec["after"])

    return handle


for _spec in json.loads(os.environ.get("APP_JOBS", "[]")):
    _settings = {
        k: v
        for k, v in _spec.items()
        if k not in {"name", "schedule", "before", "after", "sleep", "fail"}
    }
    agent.job(_spec["name"], _spec.get("schedule"), **_settings)(_handler(_spec))
