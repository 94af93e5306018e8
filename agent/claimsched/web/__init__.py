"""`claimsched web`: a read-only view of schedules, runs and agents, as HTML and JSON.

Reads through `claimsched.db.Views` (SELECT only); never imports the agent."""

from .server import make_server, parse_bind, serve

__all__ = ["make_server", "parse_bind", "serve"]
