"""`qctl validate -f FILE|DIR …`: check manifests offline, report every error, exit non-zero.

Validates MultiQ kinds and the upstream kinds we accept (batch/v1 Job, JobSet) with the same
decoder the hub uses, so a file that validates here is accepted there. Each error line names
the file, the document index, the object and the field path.

Called by: qctl.main (through qctl.cli, which declares its flags).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TextIO

from api.codec import decode, load_documents
from api.errors import DecodeError, ObjectInvalidError, UnknownKindError
from api.kinds import REGISTRY
from qctl.errors import QctlError, UsageError
from qctl.files import read_manifests

__all__ = ["ValidationReport", "run", "validate_texts"]


@dataclass
class ValidationReport:
    objects: int = 0
    invalid_objects: int = 0
    errors: int = 0


def validate_texts(texts: list[tuple[str, str]], out: TextIO, *, quiet: bool) -> ValidationReport:
    report = ValidationReport()
    for source, text in texts:
        try:
            docs = load_documents(text)
        except DecodeError as exc:
            report.errors += 1
            out.write(f"{source}: {exc}\n")
            continue
        for doc in docs:
            where = f"{source}: document {doc.index}"
            report.objects += 1
            try:
                obj = decode(doc.body, REGISTRY)
            except UnknownKindError as exc:
                report.invalid_objects += 1
                report.errors += 1
                out.write(f"{where}: {exc}\n")
            except ObjectInvalidError as exc:
                report.invalid_objects += 1
                report.errors += len(exc.errors)
                label = f"{exc.kind} {exc.name!r}" if exc.name else exc.kind
                for err in exc.errors:
                    out.write(f"{where} ({label}): {err}\n")
            else:
                if not quiet:
                    out.write(f"{where}: {obj.kind} {obj.key()!r} is valid\n")
    return report


def run(args: argparse.Namespace, out: TextIO) -> int:
    if not args.filenames:
        raise UsageError("validate needs at least one -f FILE|DIR")
    report = validate_texts(read_manifests(args.filenames), out, quiet=args.quiet)
    if report.errors:
        raise QctlError(
            f"{report.errors} error(s) in {report.invalid_objects} of {report.objects} object(s)"
        )
    out.write(f"{report.objects} object(s) valid\n")
    return 0
