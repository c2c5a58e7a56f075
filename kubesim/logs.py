"""Container logs: what the kubelet runtimes write and the `pods/log` subresource reads.

Each container instance has a `ContainerLog` of timestamped lines (bounded, oldest dropped);
a restart moves the current log to `previous` (for `?previous=true`). Followers wait on a
per-log asyncio.Event; `finish` marks the container terminated so a `follow=true` reader
stops, which is what ends `kubectl logs -f`. Written by `kubesim.kubelet`, read by the log
handler in `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kubesim.objects import now

__all__ = ["ContainerLog", "LogBook", "LogLine"]

_MAX_LINES = 20_000


@dataclass(frozen=True, slots=True)
class LogLine:
    at: dt.datetime
    text: bytes  # newline-terminated

    def stamped(self) -> bytes:
        return self.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode() + b" " + self.text


@dataclass(eq=False)
class ContainerLog:
    lines: list[LogLine] = field(default_factory=list)
    dropped: int = 0
    finished: bool = False
    previous: ContainerLog | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, text: bytes) -> None:
        if not text.endswith(b"\n"):
            text += b"\n"
        self.lines.append(LogLine(now(), text))
        if len(self.lines) > _MAX_LINES:
            cut = len(self.lines) - _MAX_LINES
            del self.lines[:cut]
            self.dropped += cut
        self._changed.set()

    def finish(self) -> None:
        self.finished = True
        self._changed.set()

    async def follow(self, start: int) -> AsyncIterator[LogLine]:
        """Lines from absolute index `start`, waiting for more until the container ends."""
        position = start
        while True:
            offset = position - self.dropped
            if offset < 0:
                position, offset = self.dropped, 0
            if offset < len(self.lines):
                batch = self.lines[offset:]
                position += len(batch)
                for line in batch:
                    yield line
                continue
            if self.finished:
                return
            self._changed.clear()
            await self._changed.wait()


class LogBook:
    """All container logs of one cluster, keyed by pod uid, then container name."""

    def __init__(self) -> None:
        self._logs: dict[str, dict[str, ContainerLog]] = {}

    def get(self, pod_uid: str, container: str) -> ContainerLog | None:
        return self._logs.get(pod_uid, {}).get(container)

    def open(self, pod_uid: str, container: str) -> ContainerLog:
        """The log a (re)started container writes to; the previous run's log is kept."""
        containers = self._logs.setdefault(pod_uid, {})
        previous = containers.get(container)
        if previous is not None:
            previous.finish()
            previous.previous = None
        log = ContainerLog(previous=previous)
        containers[container] = log
        return log

    def forget(self, pod_uid: str) -> None:
        for log in self._logs.pop(pod_uid, {}).values():
            log.finish()
