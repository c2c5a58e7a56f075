"""What commands that talk to the hub share: the connection their flags name, durations,
colour, and the coloured `cluster/pod/container` prefixes of log lines. Light on purpose (no
HTTP client): one-shot and streaming commands both import it.

Called by: the qctl command modules.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from qctl.config import ResolvedContext, resolve
from qctl.errors import UsageError

__all__ = [
    "connect",
    "format_log_record",
    "parse_duration",
    "stderr",
    "use_color",
    "write",
]

_COLORS = (31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96)


def connect(args: argparse.Namespace) -> ResolvedContext:
    return resolve(
        server=args.server,
        token=args.token,
        context=args.context,
        namespace=getattr(args, "namespace", None),
    )


_DURATION = re.compile(r"^(\d+)(s|m|h|d)?$")


def parse_duration(text: str) -> int:
    """`90`, `90s`, `5m`, `2h`, `1d` → seconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise UsageError(f"invalid duration {text!r}: use e.g. 30s, 5m, 2h")
    factor = {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2] or "s"]
    return int(match[1]) * factor


def use_color(mode: str, out: TextIO) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return out.isatty() if hasattr(out, "isatty") else False


def _color_for(text: str) -> int:
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return _COLORS[digest[0] % len(_COLORS)]


def format_log_record(
    record: Mapping[str, Any], *, color: bool, timestamps: bool, prefix: bool = True
) -> str | None:
    """One printable line for a hub log record, or None for records that are not lines."""
    if "line" not in record:
        event = record.get("event")
        if event == "dropped":
            return (
                f"[{record.get('cluster')}] … {record.get('count')} line(s) dropped (slow reader)"
            )
        if event == "lost":
            return f"[{record.get('cluster')}] {record.get('message')}"
        return None
    head = ""
    if prefix:
        label = f"{record.get('cluster')}/{record.get('pod')}/{record.get('container')}"
        head = f"\x1b[{_color_for(label)}m{label}\x1b[0m " if color else f"{label} "
    stamp = f"{record['time']} " if timestamps and record.get("time") else ""
    return f"{head}{stamp}{record['line']}"


def write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


def stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
