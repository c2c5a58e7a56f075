"""qctl's errors and the one place they become exit codes.

    QctlError            exit 1: the command ran and found a problem (invalid objects, …)
    ├── UsageError       exit 2: the command line itself is wrong (unknown flag, missing -f)
    └── InputError       exit 1: a named file or directory cannot be read

Called by: every command module (raises) and qctl.main (maps to exit codes, prints one line).
"""

from __future__ import annotations

__all__ = ["InputError", "QctlError", "UsageError", "exit_code"]


class QctlError(Exception):
    """A failure to report to the user as one clear line."""


class UsageError(QctlError):
    """The command line is wrong."""


class InputError(QctlError):
    """A file or directory named on the command line cannot be read."""


def exit_code(error: QctlError) -> int:
    return 2 if isinstance(error, UsageError) else 1
