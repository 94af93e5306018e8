"""Claiming and running: the claim loop, the worker slots and the run handle a handler gets,
the heartbeat and housekeeping, each a service with start/stop that the supervisor watches,
talking through one `Signals` object. It uses `plan` for what to claim and `db` for each
statement (the agent's own through `Statements`)."""
