"""`qctl sbatch`'s entry: answers -h/--help without importing the Slurm options, the api models
or an HTTP client (every word after `sbatch` is sbatch's, so argparse does not see --help), and
hands anything else to qctl.commands.slurm. Called by: qctl.main (through qctl.cli)."""

from __future__ import annotations

import argparse
from typing import TextIO

from qctl.cli import SBATCH_DESCRIPTION, SBATCH_USAGE, load_runner

__all__ = ["run"]


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.argv[:1] in (["-h"], ["--help"]):
        out.write(f"usage: {SBATCH_USAGE}\n\n{SBATCH_DESCRIPTION}\n")
        return 0
    return load_runner("qctl.commands.slurm:run_sbatch")(args, out)
