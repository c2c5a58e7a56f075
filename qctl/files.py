"""Turning `-f FILE|DIR|-` arguments into (display name, text) pairs, like kubectl's -f.

Directories are walked recursively for .yaml, .yml and .json files in sorted order, so output
is stable. Called by: qctl commands that read manifests (validate, and later apply/submit).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from qctl.errors import InputError

__all__ = ["MANIFEST_SUFFIXES", "read_manifests"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _expand(arg: str) -> Iterator[Path]:
    path = Path(arg)
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        if not found:
            raise InputError(f"{arg}: no .yaml, .yml or .json files in this directory")
        yield from found
    elif path.is_file():
        yield path
    elif path.exists():
        raise InputError(f"{arg}: not a regular file or directory")
    else:
        raise InputError(f"{arg}: no such file or directory")


def read_manifests(args: Sequence[str]) -> list[tuple[str, str]]:
    """Read every file named (or found under a named directory); '-' reads standard input."""
    out: list[tuple[str, str]] = []
    for arg in args:
        if arg == "-":
            out.append(("<stdin>", sys.stdin.read()))
            continue
        for path in _expand(arg):
            try:
                out.append((str(path), path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"{path}: {exc}") from exc
    return out
