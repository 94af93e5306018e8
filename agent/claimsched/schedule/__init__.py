"""When an occurrence is due: schedule expressions (cron, descriptors, ``@every``), their fire
times in an IANA zone, job specifications, and when an occurrence without a run is late.

Pure computation: imports nothing of the agent above the core (errors)."""
