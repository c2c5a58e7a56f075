"""Slurm's spellings of time limits (`--time`, `--begin` offsets) and memory sizes (`--mem`,
`--mem-per-cpu`), read as sbatch(1) reads them.

Time: `MIN`, `MIN:SEC`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`; `0`, `UNLIMITED` and `INFINITE` mean
no limit. Memory: a whole number with an optional unit K, M, G or T (binary, as Slurm's are),
megabytes when there is none. Pure. Called by: api.slurm.options.
"""

from __future__ import annotations

import re

__all__ = ["UnitError", "parse_memory_mib", "parse_time_limit"]

_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_CLOCK = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_MIB_PER_UNIT = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "": 1}


class UnitError(ValueError):
    """A time or size Slurm would not accept; the message says what was expected."""


def parse_time_limit(text: str) -> int | None:
    """Seconds, or None for no limit."""
    value = text.strip()
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    if match := _DAYS.match(value):
        days, hours = int(match[1]), int(match[2])
        minutes = int(match[3] or 0)
        seconds = int(match[4] or 0)
        total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    elif match := _CLOCK.match(value):
        parts = [int(p) for p in match.groups() if p is not None]
        if len(parts) == 1:  # minutes
            total = parts[0] * 60
        elif len(parts) == 2:  # minutes:seconds
            total = parts[0] * 60 + parts[1]
        else:  # hours:minutes:seconds
            total = (parts[0] * 60 + parts[1]) * 60 + parts[2]
    else:
        raise UnitError(
            f"{text!r} is not a time limit (expected MIN, MIN:SEC, H:M:S, D-H, D-H:M or D-H:M:S)"
        )
    return total or None


def parse_memory_mib(text: str) -> int:
    """Mebibytes (rounded up), from a size in Slurm's units; megabytes when there is no unit."""
    match = _MEMORY.match(text.strip())
    if match is None:
        raise UnitError(f"{text!r} is not a memory size (expected a number and K, M, G or T)")
    amount = int(match[1]) * _MIB_PER_UNIT[match[2].upper()]
    mib = int(amount) if amount == int(amount) else int(amount) + 1
    if mib <= 0:
        raise UnitError(
            f"{text!r}: a size of zero (Slurm's 'all the memory of a node') is not supported; "
            "ask for an amount"
        )
    return mib
