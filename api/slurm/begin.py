"""`--begin`: when a job may start, read as sbatch(1) reads it, against a clock given in.

    now+N[seconds|minutes|hours|days]   (N alone counts seconds; units may be abbreviated)
    HH:MM[:SS]                          today at that time, tomorrow if it has passed
    YYYY-MM-DD[THH:MM[:SS]]             that day (at midnight, or at that time)
    midnight, noon, teatime (16:00)     the next such time; today, tomorrow: their midnight

Wall-clock forms are read in the submitter's time zone (its offset from UTC, which qctl sends),
against the hub's clock: the hub decides, so every client gets the same answer.

Pure: `now` is an argument. Called by: the hub (hub.slurm) at submission, tests.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

__all__ = ["BeginError", "parse_begin"]

_RELATIVE = re.compile(r"^now\+(\d+)([a-z]*)$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_UNITS = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400))
_NAMED = {"midnight": (0, 0), "noon": (12, 0), "teatime": (16, 0)}


class BeginError(ValueError):
    """The text is not a time sbatch accepts for --begin; the message says what is."""


def _unit_seconds(unit: str) -> int:
    if not unit:
        return 1
    for name, seconds in _UNITS:
        if name.startswith(unit):
            return seconds
    raise BeginError(f"{unit!r} is not a unit (seconds, minutes, hours or days)")


def parse_begin(text: str, now: datetime, utc_offset_seconds: int = 0) -> datetime:
    """The time (UTC) a job submitted at `now` with `--begin=text` may start."""
    value = text.strip().lower()
    zone = timezone(timedelta(seconds=utc_offset_seconds))
    local = now.astimezone(zone)
    if value == "now":
        return now
    if match := _RELATIVE.match(value):
        return now + timedelta(seconds=int(match[1]) * _unit_seconds(match[2]))
    if value in ("today", "tomorrow"):
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return (day + timedelta(days=1 if value == "tomorrow" else 0)).astimezone(UTC)
    named = _NAMED.get(value)
    clock = _CLOCK.match(value)
    if named is not None or clock is not None:
        if clock is not None:
            hour, minute, seconds = int(clock[1]), int(clock[2]), int(clock[3] or 0)
        else:
            assert named is not None
            (hour, minute), seconds = named, 0
        if hour > 23 or minute > 59 or seconds > 59:
            raise BeginError(f"{text!r} is not a time of day")
        at = local.replace(hour=hour, minute=minute, second=seconds, microsecond=0)
        if at < local:
            at += timedelta(days=1)
        return at.astimezone(UTC)
    if match := _DATE.match(value):
        y, mo, d, h, mi, se = (int(p) if p is not None else 0 for p in match.groups())
        try:
            at = datetime(y, mo, d, h, mi, se, tzinfo=zone)
        except ValueError as exc:
            raise BeginError(f"{text!r}: {exc}") from exc
        return at.astimezone(UTC)
    raise BeginError(
        f"{text!r} is not a begin time (expected now+N[units], HH:MM[:SS], "
        "YYYY-MM-DD[THH:MM[:SS]], midnight, noon, teatime, today or tomorrow)"
    )
