"""`claimsched web`: a read-only view of schedules, runs and agents, as HTML and JSON.

Reads through `claimsched.db.Views` (SELECT only); never imports the agent. The server lives in
`claimsched.web.server`, imported by what serves: the CLI, which every replica loads, reads
the model and verdict only (`claimsched check`), and an agent's memory holds no HTTP server."""
