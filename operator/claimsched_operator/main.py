"""`claimsched-operator`: run the operator (kopf) with settings from the environment."""

from __future__ import annotations

import argparse
import logging
import sys

import kopf

from .handlers import add_status_timer, registry
from .runtime import Memo, Runtime
from .settings import OperatorSettings


def _help() -> str:
    lines = ["environment (all optional):"]
    for name, info in OperatorSettings.model_fields.items():
        env = info.alias or f"CLAIMSCHED_{name.upper()}"
        lines.append(f"  {env}\n      {info.description}")
    return "\n".join(lines)


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
    add_status_timer(config.status_interval_seconds)
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
