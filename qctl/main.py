"""qctl's entry point (also installed as `kubectl-qctl`, so `kubectl qctl …` works).

Parses the command line declared in qctl.cli, imports the chosen verb's module (and only that
one: start-up time is throughput when a shell loop submits hundreds of jobs), runs it, and
maps every QctlError to one line on stderr and an exit code, in this one place.
Called by: the `qctl` and `kubectl-qctl` scripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from qctl.cli import COMPLETE, build_parser, chosen_verb, load_runner
from qctl.errors import QctlError, exit_code

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == [COMPLETE.name]:
        # The shell's words go to the completion as they are: argparse would eat a `--`.
        return load_runner(COMPLETE.run)(argparse.Namespace(words=words[1:]), sys.stdout)
    # Only the chosen verb's flags are declared; help, no verb or an unknown one: all of them.
    parser = build_parser(chosen_verb(words))
    args = parser.parse_args(words)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = load_runner(args.run)(args, sys.stdout)
    except QctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
