"""What commands that talk to the hub share: the connection their flags name, durations and
whether to colour. Light on purpose (no HTTP client, no hashing): one-shot and streaming
commands both import it.

Called by: the qctl command modules.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TextIO

from qctl.config import ResolvedContext, resolve
from qctl.errors import UsageError

__all__ = [
    "connect",
    "parse_duration",
    "stderr",
    "use_color",
    "write",
]


def connect(args: argparse.Namespace) -> ResolvedContext:
    return resolve(
        server=args.server,
        token=args.token,
        context=args.context,
        namespace=getattr(args, "namespace", None),
        certificate_authority=getattr(args, "certificate_authority", None),
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


def write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


def stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
