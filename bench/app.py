"""The replica app the benchmarks start: `python -m claimsched.cli agent bench.app:agent`.

Its handlers are named `<BENCH_JOB_PREFIX>00000`.. (BENCH_JOB_COUNT of them); their schedules
are rows the harness writes, as the operator or the CLI would. A handler only appends one line
to BENCH_STARTS: `job  fire_time  agent  attempt  started`, where `started` is the local wall
clock when the handler began: the same host and clock as Postgres, so `started - fire_time` is
the fire-to-start latency the app sees. Everything else is the agent's defaults, configured
from CLAIMSCHED_* like any app.
"""

from __future__ import annotations

import os
import time

from claimsched import Agent, Run

agent = Agent()

_SINK = os.open(os.environ["BENCH_STARTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
_SLEEP = float(os.environ.get("BENCH_HANDLER_SLEEP", "0"))


def record_start(run: Run) -> None:
    started = time.time()
    line = (
        f"{run.job_name}\t{run.fire_time.timestamp():.6f}\t{run.agent_id}\t"
        f"{run.attempt}\t{started:.6f}\n"
    )
    os.write(_SINK, line.encode())  # one O_APPEND write: whole lines, never interleaved
    if _SLEEP:
        time.sleep(_SLEEP)


_PREFIX = os.environ.get("BENCH_JOB_PREFIX", "job")
for _index in range(int(os.environ.get("BENCH_JOB_COUNT", "0"))):
    agent.job(f"{_PREFIX}{_index:05d}")(record_start)
