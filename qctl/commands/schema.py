"""`qctl schema [KIND]`: print the JSON Schema of one kind (by name or short name), or list kinds.

Called by: qctl.main.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from api.kinds import ALL_KINDS
from api.schema import json_schema
from qctl.errors import UsageError

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of a kind, or list the kinds"
    )
    parser.add_argument("kind", nargs="?", help="kind name or short name, e.g. ClusterQueue or cq")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if not args.kind:
        for kind in ALL_KINDS:
            short = ",".join(kind.SHORT_NAMES)
            out.write(f"{kind.API_VERSION:<28} {kind.KIND:<24} {short}\n")
        return 0
    wanted = args.kind.lower()
    for kind in ALL_KINDS:
        if wanted in (kind.KIND.lower(), *kind.SHORT_NAMES):
            out.write(json.dumps(json_schema(kind), indent=2) + "\n")
            return 0
    raise UsageError(f"unknown kind {args.kind!r}; run `qctl schema` to list the kinds")
