"""The shape every in-process controller shares: a deduplicating work queue and a loop.

Store subscribers (which run inside writes and must not write) only `enqueue` keys; the
controller's `run` loop drains the queue in batches and reconciles each key, yielding to the
event loop between batches so API requests stay responsive. Delayed work (deadlines, TTLs,
retries) goes through `enqueue_after`. Subclassed by the job controller, scheduler, garbage
collector and kubelet; started and stopped by `kubesim.cluster`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["QueueController"]

Key = TypeVar("Key", bound=Hashable)

_log = logging.getLogger(__name__)


class QueueController(Generic[Key]):
    """Reconciles keys from a deduplicating FIFO; subclasses implement `reconcile`."""

    name = "controller"
    batch_size = 512

    def __init__(self) -> None:
        self._pending: dict[Key, None] = {}
        self._wakeup = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()

    def enqueue(self, key: Key) -> None:
        self._pending[key] = None
        self._wakeup.set()

    def enqueue_after(self, key: Key, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            self.enqueue(key)

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers.add(handle)

    def reconcile(self, key: Key) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        try:
            while True:
                if not self._pending:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                keys = list(self._pending)[: self.batch_size]
                for key in keys:
                    del self._pending[key]
                    try:
                        self.reconcile(key)
                    except Exception:  # one bad object must not stop the controller
                        _log.exception("%s failed to reconcile %r", self.name, key)
                await asyncio.sleep(0)
        finally:
            for handle in self._timers:
                handle.cancel()
            self._timers.clear()
