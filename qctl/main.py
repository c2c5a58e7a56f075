"""qctl's entry point (also installed as `kubectl-qctl`, so `kubectl qctl …` works).

Builds the command line from the command modules and maps every QctlError to one line on
stderr and an exit code, in this one place. Called by: the `qctl` and `kubectl-qctl` scripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from qctl.commands import dev, resources, schema, validate, workloads
from qctl.errors import QctlError, exit_code

__all__ = ["build_parser", "main"]

VERSION = "0.1.0"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qctl",
        description="MultiQ: submit, watch and manage batch work across a fleet of clusters.",
    )
    parser.add_argument("--version", action="version", version=f"qctl {VERSION}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    workloads.register(subparsers)
    resources.register(subparsers)
    validate.register(subparsers)
    schema.register(subparsers)
    dev.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.run(args, sys.stdout)
    except QctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
