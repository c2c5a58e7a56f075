"""qctl's entry point (also installed as `kubectl-qctl`, so `kubectl qctl …` works).

Parses the command line declared in qctl.cli, imports the chosen verb's module (and only that
one: start-up time is throughput when a shell loop submits hundreds of jobs), runs it, and
maps every QctlError to one line on stderr and an exit code, in this one place.
Called by: the `qctl` and `kubectl-qctl` scripts (through `entry`), tests (`main`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from qctl.cli import COMPLETE, build_parser, chosen_verb, load_runner
from qctl.errors import QctlError, exit_code

__all__ = ["build_parser", "entry", "main"]


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


def entry() -> NoReturn:
    """The installed scripts' entry: run `main`, then leave at once. A short-lived CLI gains
    nothing from the interpreter's orderly teardown (tearing down every imported module and
    collecting what they held), which costs a few milliseconds of a `qctl sbatch` call's CPU,
    and a loop of sbatch calls pays it every time. Every file qctl writes is closed by a `with`
    block or `write_text` before `main` returns; only stdout and stderr are left to flush."""
    try:
        code = main()
    except SystemExit as exc:  # argparse's --help and usage errors end this way
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `qctl get … | head`: the reader left; nothing more to say
            code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
