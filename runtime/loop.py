"""The event loop a hub or agent process runs on: uvloop's by default, asyncio's own when
asked for (`--event-loop asyncio`) or when uvloop is not installed (it is not built for
Windows; the console scripts then run on asyncio's loop, with a warning).

Why uvloop: both processes spend most of their CPU running Python (perf: three quarters in
the interpreter), and a part of it is asyncio's own loop — the selector, the transports'
reads and writes, the callbacks' handles — which uvloop runs in C (libuv). In
`bench.federation_dispatch --workloads 2000 --paced 1000`, 6 interleaved pairs on a 2-core
VM, (hub + agents) / kubesim CPU per workload went from 2.81 to 2.70 in the burst and from
3.12 to 2.89 at 200/s (medians); kubesim, that bench's yardstick, keeps asyncio's loop. The
async tests run on uvloop too (the root conftest.py), so what is tested is what runs.

Called by: hub.main (`web.run_app(loop=…)`), agent.main (`asyncio.Runner(loop_factory=…)`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

__all__ = ["EVENT_LOOPS", "EventLoopKind", "new_event_loop"]

log = logging.getLogger(__name__)

EventLoopKind = Literal["uvloop", "asyncio"]
EVENT_LOOPS: tuple[EventLoopKind, ...] = ("uvloop", "asyncio")


def new_event_loop(kind: EventLoopKind = "uvloop") -> asyncio.AbstractEventLoop:
    """A new event loop of `kind`; asyncio's when uvloop is asked for but not installed."""
    if kind == "uvloop":
        try:
            import uvloop  # noqa: PLC0415 - not installed everywhere (no Windows build)
        except ImportError:
            log.warning("uvloop is not installed: running on asyncio's own event loop")
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()
