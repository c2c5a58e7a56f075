"""The hub's eternal tasks: run under a guard that logs a crash and starts the task again.

Called by: hub.app (the state mirror, the election) and hub.leader (the leader-only loops);
`cancel_all` also by hub.election and hub.store.etcd, wherever a task started for a while
(a watch pump, a lease keepalive, a wait) is stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["cancel_all", "guarded", "raise_if_cancelling", "start_guarded"]

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


def raise_if_cancelling() -> None:
    """Raise `CancelledError` in a task that was asked to cancel: called before a wait that
    may not end, so that a cancellation lost on the way still ends the task. Libraries lose
    some: Python 3.11's `asyncio.wait_for` (which aetcd uses) returns a result that came
    with the cancellation, a gRPC call cancelled as its reply arrives may fail instead of
    being cancelled — and the etcd loops retry after failures."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def start_guarded(name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(guarded(name, run), name=f"hub-{name}")


async def cancel_all(tasks: Iterable[asyncio.Future[Any]], *, within: float | None = None) -> None:
    """Cancel the tasks and wait until every one has ended, or for `within` seconds at most
    (those still running then are logged and left). A cancellation of the caller while it
    waits is raised, never lost; the tasks' own endings (results, errors, cancellation) are
    left in them for whoever wants them."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    if tasks:
        # asyncio.wait, not awaiting each task under suppress(CancelledError): that would
        # also swallow a cancellation of the caller.
        _, running = await asyncio.wait(tasks, timeout=within)
        for task in running:
            log.warning("task %r did not end within %gs of its cancellation", task, within)
