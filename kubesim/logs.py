"""Container logs: what the kubelet runtimes write and the `pods/log` subresource reads.

Each container instance has a `ContainerLog` of timestamped lines (bounded in bytes as a
kubelet's log file is, oldest dropped; the lines one read of the output brought share a
stamp);
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

_MAX_BYTES = 10 * 1024 * 1024
"""A container's log is kept up to this many bytes of text, as a kubelet keeps its current
log file up to `containerLogMaxSize` (10 MiB by default) and `kubectl logs` reads that one."""
_ROTATED_TO = _MAX_BYTES * 3 // 4
"""Past the bound the oldest lines go in one cut, down to this: a kubelet rotates the file
away at once, not a line at a time (and one cut per line would move the whole list)."""


@dataclass(frozen=True, slots=True)
class LogLine:
    at: dt.datetime
    text: bytes  # newline-terminated
    stamp: bytes
    """`at` as `timestamps=true` prints it, followed by a space: formatted once, when the line
    is written, not by every reader (strftime per line and reader was most of the log
    route's time)."""

    def stamped(self) -> bytes:
        return self.stamp + self.text


def _stamp(at: dt.datetime) -> bytes:
    return (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:"
        f"{at.second:02d}.{at.microsecond:06d}Z "
    ).encode()


@dataclass(eq=False)
class ContainerLog:
    lines: list[LogLine] = field(default_factory=list)
    dropped: int = 0
    size: int = 0
    """Bytes of text in `lines`."""
    finished: bool = False
    previous: ContainerLog | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, text: bytes) -> None:
        self.extend([text])

    def extend(self, texts: list[bytes]) -> None:
        """Lines written at one moment (what one read of the container's output brought):
        stamped once; a newline is added to a line without one."""
        at = now()
        stamp = _stamp(at)
        for written in texts:
            text = written if written.endswith(b"\n") else written + b"\n"
            self.lines.append(LogLine(at, text, stamp))
            self.size += len(text)
        if self.size > _MAX_BYTES:
            cut = 0
            while self.size > _ROTATED_TO:
                self.size -= len(self.lines[cut].text)
                cut += 1
            del self.lines[:cut]
            self.dropped += cut
        self._changed.set()

    def finish(self) -> None:
        self.finished = True
        self._changed.set()

    async def follow(self, start: int) -> AsyncIterator[list[LogLine]]:
        """Lines from absolute index `start`, in batches of what is there, waiting for more
        until the container ends."""
        position = start
        while True:
            offset = position - self.dropped
            if offset < 0:
                position, offset = self.dropped, 0
            if offset < len(self.lines):
                batch = self.lines[offset:]
                position += len(batch)
                yield batch
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
