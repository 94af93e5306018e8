"""`claimsched-operator`: run the operator (kopf) with settings from the environment."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

import kopf

from . import finalizers  # noqa: F401  (registers its handler)
from .handlers import registry
from .runtime import Memo, Runtime
from .settings import OperatorSettings


def _help() -> str:
    lines = ["environment (all optional):"]
    for name, info in OperatorSettings.model_fields.items():
        env = info.alias or f"CLAIMSCHED_{name.upper()}"
        lines.append(f"  {env}\n      {info.description}")
    return "\n".join(lines)


def port_taken(port: int) -> str | None:
    """Why the operator could not listen on `port` (all addresses), or None when it can (or
    the port is 0: off). Checked before kopf starts: a server that cannot bind inside kopf's
    startup leaves the operator running without health, status or metrics."""
    if not port:
        return None
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("0.0.0.0", port))
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        probe.close()
    return None


def parser() -> argparse.ArgumentParser:
    """The command line of `claimsched-operator` (its settings come from the environment)."""
    top = argparse.ArgumentParser(
        prog="claimsched-operator",
        description="Sync ClaimSchedules into claimsched's job_schedule table and report status.",
        epilog=_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--verbose", action="store_true", help="log at debug level")
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    config = OperatorSettings()
    for port, setting in ((config.health_port, "CLAIMSCHED_OPERATOR_HEALTH_PORT"),
                          (config.metrics_port, "CLAIMSCHED_OPERATOR_METRICS_PORT")):
        problem = port_taken(port)
        if problem:
            sys.exit(f"claimsched-operator: error: port {port} ({setting}) cannot be used: "
                     f"{problem}; set {setting} to a free port (0: off)")
    namespaces = config.namespace_list
    kopf.run(
        registry=registry,
        memo=Memo(Runtime.create(config)),
        standalone=not config.peering,
        peering_name=config.peering or None,
        priority=config.effective_priority,
        clusterwide=not namespaces,
        namespaces=namespaces,
    )


if __name__ == "__main__":
    main()
