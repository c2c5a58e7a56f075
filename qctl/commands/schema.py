"""`qctl schema [KIND]`: print the JSON Schema of one kind (by name or short name), or list kinds.

Called by: qctl.main (through qctl.cli, which declares its flags).
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from api.kinds import ALL_KINDS
from api.schema import json_schema
from qctl.errors import UsageError

__all__ = ["run"]


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
