"""The chaos harness: real agent processes (`app`, started by `harness`), seeded storms of
overlapping faults and the invariants checked after them (`storm`).

The chaos tests (tests/chaos) and the soak profile (bench/soak.py) both run it. Replay a storm:

    python -m bench.chaos --seed 23 --replicas 5 --jobs 20 --duration 22

A run with violations keeps the database's tables next to its logs; CHAOS_DUMP=1 keeps them
of every run.
"""
