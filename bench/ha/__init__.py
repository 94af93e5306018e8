"""Where users really run Postgres, started for a storm, a benchmark or a test: a Patroni cluster
(etcd and two PG 15 nodes, synchronous by default) and a TCP proxy that black-holes traffic.

bench/chaos, bench/steady and the tests (tests/ha) all use them; bench never imports tests.
"""
