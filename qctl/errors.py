"""qctl's errors and the one place they become exit codes.

    QctlError            exit 1: the command ran and found a problem (invalid objects, …)
    ├── UsageError       exit 2: the command line itself is wrong (unknown flag, missing -f)
    ├── InputError       exit 1: a named file or directory cannot be read
    └── HubRequestError  exit 1: the hub answered with an error status

Called by: every command module (raises) and qctl.main (maps to exit codes, prints one line).
"""

from __future__ import annotations

import json
from typing import Self

__all__ = ["HubRequestError", "InputError", "QctlError", "UsageError", "exit_code"]


class QctlError(Exception):
    """A failure to report to the user as one clear line."""


class UsageError(QctlError):
    """The command line is wrong."""


class InputError(QctlError):
    """A file or directory named on the command line cannot be read."""


class HubRequestError(QctlError):
    """The hub answered with an error status (its Status message, one line per field error)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @classmethod
    def from_reply(cls, status: int, phrase: str, text: str) -> Self:
        """The error a reply of this status and body means: its Kubernetes Status message,
        followed by each field error (`details.causes`) on a line of its own."""
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            body = {"message": text.strip() or phrase, "reason": ""}
        message = str(body.get("message") or phrase)
        causes = (body.get("details") or {}).get("causes") or []
        if causes:
            message += "".join(f"\n  {c.get('message', c)}" for c in causes)
        return cls(status, str(body.get("reason", "")), message)


def exit_code(error: QctlError) -> int:
    return 2 if isinstance(error, UsageError) else 1
