"""The chaos harness: real agent processes (`app`, started by `harness`), seeded storms of
overlapping faults and the invariants checked after them. A storm, from its command line down:
`cli` (the options, `python -m bench.chaos`), `storm` (one run end to end: ChaosRun), the faults
it runs (`executors`; the recovery faults in `recovery`, the rolling upgrade in `upgrade`), the
maintenance beside them (`maintenance`), the seeded plan (`plan`, the jobs in `jobs`, asked for
by `config`, drawn from `kinds`), the plan's records and lanes (`faults`), the invariants
(`checker`; those of recovery in `recovery_checks`, those about time in `timeline`) and the
report (`report`).

The chaos tests (tests/chaos) and the soak profile (bench/soak.py) both run it. Replay a storm:

    python -m bench.chaos --seed 31 --replicas 5 --jobs 20 --duration 22
    python -m bench.chaos --seed 3 --ha --replicas 3 --jobs 8 --duration 40

With --ha the database is a Patroni cluster (bench/ha: etcd, two nodes, synchronous_mode_strict)
that the agents reach by a DSN naming both nodes, and its faults are failovers: the leader
SIGKILLed (Patroni, postmaster and children; the synchronous standby is promoted about 20 s
later, the dead node rejoins) or switched over. A partition fault black-holes every connection
of one replica for longer than every lease (bench/ha/blackhole.py), on either database. The odd
replicas (r1, r3, ...) reach the database through pgbouncer in transaction mode
(bench/ha/pgbouncer.py; with --ha it points at the leader and is moved to the new one after a
failover, as a Patroni role-change callback would: through a pgbouncer beside each node, libpq's
target_session_attrs cannot tell a demoted node, pgbouncer issue #859), and a pooler fault kills
it (each connection through it drops mid-transaction) and starts it again after up to 4 s, or
pauses it (PAUSE: the transactions in flight finish, every new one waits) for up to 3 s longer
than every lease.
Synchronous and strict, a failover loses no acknowledged commit, so every invariant holds with
no allowance. One harness tolerance only: a replica that refuses to start for want of a primary
up to 30 s after a failover (10 s after a standalone outage) is restarted as a kubelet would, and
counted (`notes.startup_refused_while_db_down`), not reported as a crash.

With `--kinds rolling_upgrade,...` a storm begins on the previous release (its migrate and its
agents, built from this repository's history: bench/releases.py); its first fault runs this
release's migrate under them and rolls the fleet to this release a replica at a time, and no
other fault starts before that ends (`upgrade`):

    python -m bench.chaos --seed 5 --replicas 3 --jobs 8 --duration 30 \
        --kinds rolling_upgrade,sigkill,sigstop,sigterm,pg_outage,trigger,skew

A run with violations keeps the database's tables next to its logs; CHAOS_DUMP=1 keeps them
of every run.
"""
