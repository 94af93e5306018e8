"""Tools around the agent, never imported by it: the demo, a throwaway PostgreSQL server and the
launcher of real agent processes (used by the demo, the tests and the benchmarks)."""
