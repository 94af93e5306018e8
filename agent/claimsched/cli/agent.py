"""`claimsched agent MODULE:ATTR`: run an app's Agent until SIGTERM (what a replica starts)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import logs
from ..agent import Agent
from ..errors import ConfigurationError
from ..settings import AgentSettings
from .common import Add


def run(args: argparse.Namespace) -> int:
    module_name, _, attr = args.target.partition(":")
    # As uvicorn and gunicorn do: the app's module is found in the working directory, which a
    # console script (unlike `python -m`) does not put on the path.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from None
    agent = getattr(module, attr or "agent", None)
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"{args.target} is not a claimsched.Agent")
    logs.configure(agent.settings.log_level)
    return agent.run_forever()


def register(add: Add) -> None:
    agent = add("agent", run, "run the Agent found at MODULE:ATTR until SIGTERM")
    agent.add_argument("target", metavar="MODULE:ATTR")
    agent.formatter_class = argparse.RawDescriptionHelpFormatter
    agent.epilog = "settings (environment):\n" + "\n".join(
        f"  {field.alias or 'CLAIMSCHED_' + name.upper():36} {field.description}"
        for name, field in AgentSettings.fields.items()
    )
