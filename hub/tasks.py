"""The hub's eternal tasks: run under a guard that logs a crash and starts the task again.

Called by: hub.app (the state mirror, the election) and hub.leader (the leader-only loops).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

__all__ = ["cancel_all", "guarded", "start_guarded"]

log = logging.getLogger(__name__)

RESTART_PAUSE_SECONDS = 1.0


async def guarded(name: str, run: Callable[[], Awaitable[None]]) -> None:
    """Run an eternal task; log (and restart after a pause) if it ever ends or crashes."""
    while True:
        try:
            await run()
            log.error("task %s ended unexpectedly; restarting", name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("task %s crashed; restarting in %gs", name, RESTART_PAUSE_SECONDS)
        await asyncio.sleep(RESTART_PAUSE_SECONDS)


def start_guarded(name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(guarded(name, run), name=f"hub-{name}")


async def cancel_all(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel the tasks and wait until every one has ended."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    if tasks:
        # asyncio.wait, not awaiting each task under suppress(CancelledError): that would
        # also swallow a cancellation of the caller.
        await asyncio.wait(tasks)
