"""`claimsched web` and `claimsched demo`: launch the read-only web view, or the demo."""

from __future__ import annotations

import argparse
import importlib.util

from .. import logs
from ..errors import ConfigurationError
from .common import Add, dsn


def serve(args: argparse.Namespace) -> int:
    from ..web.server import serve as serve_web  # not loaded by every replica's CLI

    logs.configure("INFO")
    return serve_web(dsn(args), args.schema, args.bind)


def demo(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("rich") is None:
        raise ConfigurationError("the demo needs rich: pip install 'claimsched[demo]'")
    from ..tools.demo.runner import run_demo  # rich and the demo load only for this command

    return run_demo(args)


def register(add: Add) -> None:
    add("web", serve, "serve a read-only view of schedules, runs and agents (HTML, JSON)"
        ).add_argument("--bind", default="127.0.0.1:8080", metavar="HOST:PORT",
                       help="where to listen (default 127.0.0.1:8080: this machine only)")
    shown = add("demo", demo, "show exactly-once work: N replicas, a kill, a pause, a verdict")
    shown.add_argument(
        "--replicas", type=int, default=3, help="agent processes (default 3, at least 2)"
    )
    shown.add_argument(
        "--duration",
        type=float,
        default=30.0,
        help="seconds to run at least (default 30); it runs on until the kill "
        "and the pause have played out",
    )
    shown.add_argument(
        "--keep", type=float, nargs="?", const=0.0, default=None, metavar="SECONDS",
        help="after the verdict, print the embedded database's DSN and keep it up for "
        "`claimsched web` until Ctrl-C or SIGTERM (or SECONDS)",
    )
