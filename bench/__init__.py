"""claimsched benchmarks: real Postgres, real agent processes, numbers in bench/results/.

Run one scenario with `python -m bench run a --replicas 4` (see bench/README.md).
"""
