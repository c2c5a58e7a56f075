"""W3C trace context (https://www.w3.org/TR/trace-context/): the `traceparent` header, parsed
and formatted, and where a workload keeps its own.

    traceparent: 00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>

A header that breaks the rules is not an error: `parse` answers None and the caller starts a
trace of its own (the specification asks receivers to ignore a malformed header). Pure: no
clock, no randomness of its own (`generate` takes its entropy as an argument), and nothing
imported beyond `re`, so qctl can send a header without loading anything heavy.

Called by: qctl.rest (a header on every request), hub.tracing and agent.tracing (the
submission's context, kept in the workload's `TRACEPARENT_ANNOTATION`), telemetry.tracing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["TRACEPARENT_ANNOTATION", "TRACEPARENT_HEADER", "TraceParent", "generate", "parse"]

TRACEPARENT_HEADER = "traceparent"
TRACEPARENT_ANNOTATION = "multiq.dev/traceparent"
"""On a Workload: the context of its submission, which every later span of it continues (a
workload may wait hours; no span stays open that long, each later one is a child of this)."""

SAMPLED = 0x01

# Version 00 has exactly four fields; a later version may add fields after a dash, which a
# version-00 reader ignores. Upper-case hex is invalid. Version ff is forbidden.
_HEADER = re.compile(
    r"^(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-.*)?$"
)


class TraceParent(NamedTuple):
    """One parsed `traceparent`: ids as integers, as OpenTelemetry keeps them."""

    trace_id: int
    span_id: int
    flags: int = SAMPLED

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def format(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.flags:02x}"


def parse(header: str | None) -> TraceParent | None:
    """The header's context, or None when it is missing or breaks the rules."""
    if not header:
        return None
    found = _HEADER.match(header.strip())
    if found is None:
        return None
    version = found["version"]
    if version == "ff" or (version == "00" and found["rest"] is not None):
        return None
    trace_id = int(found["trace"], 16)
    span_id = int(found["span"], 16)
    if trace_id == 0 or span_id == 0:
        return None  # all-zero ids are invalid
    return TraceParent(trace_id, span_id, int(found["flags"], 16))


def generate(entropy: Callable[[int], bytes]) -> TraceParent:
    """A new sampled context from `entropy(n)` bytes (os.urandom in qctl)."""
    while True:
        trace_id = int.from_bytes(entropy(16), "big")
        span_id = int.from_bytes(entropy(8), "big")
        if trace_id and span_id:
            return TraceParent(trace_id, span_id)
