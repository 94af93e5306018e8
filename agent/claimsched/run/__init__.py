"""Claiming and running: the claim loop, the worker slots and the run handle a handler gets,
the heartbeat and housekeeping, and the supervisor that watches their threads. It uses
`plan` for what to claim and `db` for each statement."""
