"""W3C trace context (https://www.w3.org/TR/trace-context/): the `traceparent` header, parsed
and formatted, and where a workload keeps its own.

    traceparent: 00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>

A header that breaks the rules is not an error: `parse` answers None and the caller starts a
trace of its own (the specification asks receivers to ignore a malformed header). Pure: no
clock, no randomness of its own (`generate` takes its entropy as an argument), and nothing
imported, so qctl can send a header without loading anything heavy.

Called by: qctl.rest (a header on every request), hub.tracing and agent.tracing (the
submission's context, kept in the workload's `TRACEPARENT_ANNOTATION`), telemetry.tracing.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["TRACEPARENT_ANNOTATION", "TRACEPARENT_HEADER", "TraceParent", "generate", "parse"]

TRACEPARENT_HEADER = "traceparent"
TRACEPARENT_ANNOTATION = "multiq.dev/traceparent"
"""On a Workload: the context of its submission, which every later span of it continues (a
workload may wait hours; no span stays open that long, each later one is a child of this)."""

SAMPLED = 0x01
_HEX = frozenset("0123456789abcdef")  # upper-case hex is invalid


def _is_hex(text: str, digits: int) -> bool:
    return len(text) == digits and _HEX.issuperset(text)


class TraceParent:
    """One parsed `traceparent`: ids as integers, as OpenTelemetry keeps them. (A plain class,
    not a dataclass or a NamedTuple: qctl imports this on every command, and building either
    costs a millisecond or two of its start-up.)"""

    __slots__ = ("flags", "span_id", "trace_id")

    def __init__(self, trace_id: int, span_id: int, flags: int = SAMPLED) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.flags = flags

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceParent):
            return NotImplemented
        return (self.trace_id, self.span_id, self.flags) == (
            other.trace_id,
            other.span_id,
            other.flags,
        )

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id, self.flags))

    def __repr__(self) -> str:
        return f"TraceParent({self.format()!r})"

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def format(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.flags:02x}"


def parse(header: str | None) -> TraceParent | None:
    """The header's context, or None when it is missing or breaks the rules."""
    if not header:
        return None
    fields = header.strip().split("-")
    if len(fields) < 4:
        return None
    version, trace, span, flags = fields[:4]
    if not (_is_hex(version, 2) and _is_hex(trace, 32) and _is_hex(span, 16) and _is_hex(flags, 2)):
        return None
    # Version ff is forbidden; version 00 has exactly four fields (a later version may add
    # some after a dash, which a version-00 reader ignores).
    if version == "ff" or (version == "00" and len(fields) != 4):
        return None
    trace_id = int(trace, 16)
    span_id = int(span, 16)
    if trace_id == 0 or span_id == 0:
        return None  # all-zero ids are invalid
    return TraceParent(trace_id, span_id, int(flags, 16))


def generate(entropy: Callable[[int], bytes]) -> TraceParent:
    """A new sampled context from `entropy(n)` bytes (os.urandom in qctl)."""
    while True:
        trace_id = int.from_bytes(entropy(16), "big")
        span_id = int.from_bytes(entropy(8), "big")
        if trace_id and span_id:
            return TraceParent(trace_id, span_id)
