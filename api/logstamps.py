"""Log line timestamps as MultiQ carries them: one canonical RFC 3339 text, end to end.

A `LogLine.timestamp` is the text `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` — UTC, microseconds,
always 32 characters — from the agent that read the line to the hub's store and the reader.
Because every producer writes this one form, comparing two stamps as strings is comparing
the times (the agent's readers and the hub's store do, for `since` and for lines that share
a stamp), and no one parses a datetime per line: the agent turns the cluster's stamp into
this form with string operations, and the hub checks a frame's stamps with one regex over
them all. It is also what `datetime.isoformat(timespec="microseconds")` writes for a UTC
time, what the hub's store has always kept, and what an older hub's pydantic parses into a
`datetime`.

Forms accepted and made canonical (`canonical_stamp`; a stamp outside them is refused with
`InvalidStampError`, which names it):
- the kubelet's `timestamps=true` prefix: RFC3339Nano in UTC (`…T10:00:00.123456789Z`, 0 to 9
  fraction digits, trailing zeros left out) — the fraction is cut or padded to 6 digits
  (a datetime keeps microseconds too; lines within one microsecond keep their order in the
  log and share a stamp, as lines of one kubesim read always did);
- an older agent's (pydantic's datetime JSON: `Z` or `+00:00`, any fraction) and any other
  offset (a node whose runtime writes local time), turned to UTC through a datetime — the
  slow path, taken only for a stamp not in the first two forms; a stamp without an offset is
  taken as UTC, as the hub's store did before.

Called by: api.v1alpha1.messages (LogData checks its lines' stamps), agent.logs (the
cluster's stamps), hub.loghub (`since` for the store).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["InvalidStampError", "all_canonical", "canonical_stamp", "stamp_of"]

_DATE_TIME = (
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
)
"""Each field in its range (a day past its month's end is not caught: no clock writes one)."""
_CANONICAL = _DATE_TIME + r"\.\d{6}\+00:00"
_CANONICAL_RE = re.compile(_CANONICAL)
_ALL_CANONICAL_RE = re.compile(f"{_CANONICAL}(?:\n{_CANONICAL})*")
"""Stamps joined by newlines (which no stamp holds, so each is matched whole)."""
_MICROSECONDS_Z_RE = re.compile(_DATE_TIME + r"\.\d{6}Z")
"""The kubelet's form with exactly 6 fraction digits, kubesim's always: tried first."""
_KUBELET_RE = re.compile(f"({_DATE_TIME})(?:\\.(\\d{{1,9}}))?Z")
"""RFC3339Nano in UTC: what a kubelet (and kubesim) prints before a line."""
_ANY_RE = re.compile(
    r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:[Zz]|[+-]\d\d:\d\d)?", re.ASCII
)
"""What the slow path hands to `datetime.fromisoformat` (which alone would also take a
date without a time, week dates and more)."""
CANONICAL_LENGTH = 32


class InvalidStampError(ValueError):
    """A log line's timestamp is not an RFC 3339 date and time."""

    def __init__(self, stamp: str) -> None:
        super().__init__(
            f"not an RFC 3339 timestamp: {stamp[:64]!r} "
            "(want e.g. 2026-12-04T10:00:00.123456+00:00 or 2026-12-04T10:00:00.123456789Z)"
        )
        self.stamp = stamp


def stamp_of(when: datetime) -> str:
    """The canonical stamp of a time (a naive one is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")


def canonical_stamp(stamp: str) -> str:
    """`stamp` in the canonical form; raises InvalidStampError for a malformed one. Called
    for every line an agent reads: the common forms are recognised first, by their length."""
    if len(stamp) == 27 and _MICROSECONDS_Z_RE.fullmatch(stamp):
        return stamp[:26] + "+00:00"
    if len(stamp) == CANONICAL_LENGTH and _CANONICAL_RE.fullmatch(stamp):
        return stamp
    kubelet = _KUBELET_RE.fullmatch(stamp)
    if kubelet is not None:
        if len(stamp) >= 27:  # 6 to 9 fraction digits (kubesim writes 6): the first 6
            return stamp[:26] + "+00:00"
        return f"{kubelet[1]}.{kubelet[2] or '':0<6}+00:00"
    if not _ANY_RE.fullmatch(stamp):
        raise InvalidStampError(stamp)
    # Cut a fraction past microseconds (a datetime holds no more; older Pythons refuse it).
    head, dot, rest = stamp.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[: min(digits, 6)] + rest[digits:]
    try:
        return stamp_of(datetime.fromisoformat(f"{head}{dot}{rest}".upper()))
    except ValueError:
        raise InvalidStampError(stamp) from None


def all_canonical(stamps: list[str]) -> bool:
    """Whether every stamp is canonical already: one regex over them all (a frame's lines are
    checked in one call, not one per line)."""
    return not stamps or _ALL_CANONICAL_RE.fullmatch("\n".join(stamps)) is not None
