"""Long-lived responses — watches, log follows, streams forwarded to the leader — end when the
hub shuts down.

aiohttp's graceful shutdown waits for every running handler (up to a minute, `run_app`'s
shutdown timeout) before it cancels them, and a watch waits for its next event for as long as
none comes: one open `qctl get -w` or dashboard page held a stopping hub up until it was
killed. So each streaming handler runs its loop inside `OpenStreams.until_shutdown`, and the
hub's shutdown (`end_all`, an `on_shutdown` step) stops every loop where it waits. The handler
then finishes its response as when its stream ends — the last chunk is written — so a client
sees a watch that ended, as when a Kubernetes API server stops, and watches again (at another
hub, with several).

Called by: hub.http.resources (watches), hub.http.logs (follows), hub.http.leader (forwarded
streams), hub.app (`end_all` at shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

__all__ = ["STREAMS", "OpenStreams"]


class OpenStreams:
    """The streaming handlers running now, each stopped at once by `end_all`."""

    def __init__(self) -> None:
        self._open: set[asyncio.Timeout] = set()
        self.ending = False

    @contextlib.asynccontextmanager
    async def until_shutdown(self, lasting: float | None = None) -> AsyncIterator[None]:
        """Run the body until it ends, until the hub shuts down, or for `lasting` seconds
        (None: no limit; a watch's `timeoutSeconds`): then it stops where it waits, and the
        context ends without an error (the caller finishes its response)."""
        try:
            async with asyncio.timeout(0 if self.ending else lasting) as deadline:
                self._open.add(deadline)
                try:
                    yield
                finally:
                    self._open.discard(deadline)
        except TimeoutError:
            if not deadline.expired():
                raise  # the body's own timeout, not the shutdown or `lasting`

    def end_all(self) -> None:
        """Stop every open stream (and any opened from now on)."""
        self.ending = True
        now = asyncio.get_running_loop().time()
        for deadline in self._open:
            deadline.reschedule(now)

    def __len__(self) -> int:
        return len(self._open)


STREAMS = web.AppKey("streams", OpenStreams)
