"""`qctl validate -f FILE|DIR …`: check manifests offline, report every error, exit non-zero.

Validates MultiQ kinds, the upstream kinds we accept (batch/v1 Job, JobSet) and Kueue's queue
kinds (converted as `qctl apply` converts them, api.kueue) with the same decoder the hub uses,
so a file that validates here is accepted there. Each error line names
the file, the document index, the object and the field path.

Called by: qctl.main (through qctl.cli, which declares its flags).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TextIO

from qctl.commands.manifests import decode_files
from qctl.errors import QctlError, UsageError

__all__ = ["ValidationReport", "run", "validate_files"]


@dataclass
class ValidationReport:
    objects: int = 0
    invalid_objects: int = 0
    errors: int = 0


def validate_files(filenames: list[str], out: TextIO, *, quiet: bool) -> ValidationReport:
    report = ValidationReport()
    for item in decode_files(filenames):
        report.objects += 1
        if not item.ok:
            report.invalid_objects += 1
            report.errors += len(item.problems)
            for problem in item.problems:
                sep = " " if problem.startswith("(") else ": "
                out.write(f"{item.where}{sep}{problem}\n")
        elif not quiet:
            if item.note:
                out.write(f"{item.where}: {item.note}\n")
            for obj in item.objects:
                out.write(f"{item.where}: {obj.kind} {obj.key()!r} is valid\n")
    return report


def run(args: argparse.Namespace, out: TextIO) -> int:
    if not args.filenames:
        raise UsageError("validate needs at least one -f FILE|DIR")
    report = validate_files(args.filenames, out, quiet=args.quiet)
    if report.errors:
        raise QctlError(
            f"{report.errors} error(s) in {report.invalid_objects} of {report.objects} object(s)"
        )
    out.write(f"{report.objects} object(s) valid\n")
    return 0
