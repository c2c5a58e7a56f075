"""Log streams the hub asked for: every container of every pod of a workload, read with
`read_namespaced_pod_log` (follow, since, tail), tagged with cluster, pod, container and
timestamp, batched into `LogData` frames on the log lane.

One `_Stream` per LogOpen: a discovery task starts a reader per (pod, container) once the
container has started (and, when following, keeps picking up pods that appear later); readers
append to one bounded buffer per stream — when the hub is slow and the buffer is full the
oldest lines are dropped and counted in the next frame's `dropped`; a sender drains the
buffer in batches of up to `batch_lines` lines of one (pod, container), awaiting the lane
(backpressure stays here and never reaches the control lane). When a reader ends the
(pod, container) gets a frame with `eof=True`. The stream ends — with a last frame
`pod="", container="", eof=True` — once every reader ended and no more can come: at once
without follow, and with follow when the workload is finished here (or not held at all).
LogClose (or a lost lane) cancels it.

Called by: agent.app (LogOpen/LogClose from the hub session's log lane).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from agent.errors import HubUnreachableError, K8sError
from agent.inventory import Inventory
from agent.k8s.client import JsonObject, Kube
from api.v1alpha1.messages import LogClose, LogData, LogLine, LogOpen

__all__ = ["LogStreams", "parse_line"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (pod, container)


def parse_line(raw: str) -> LogLine:
    """A `timestamps=true` log line: RFC 3339 stamp, a space, the text."""
    stamp, sep, text = raw.partition(" ")
    if sep:
        try:
            return LogLine(timestamp=datetime.fromisoformat(stamp), text=text)
        except ValueError:
            pass
    return LogLine(text=raw)


@dataclass(slots=True)
class _Entry:
    key: Key
    line: LogLine


def _started(pod: JsonObject, container: str) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            state = cs.get("state") or {}
            return "running" in state or "terminated" in state
    return False


class _Stream:
    def __init__(self, owner: LogStreams, request: LogOpen) -> None:
        self.owner = owner
        self.request = request
        self.buffer: deque[_Entry] = deque()
        self.dropped: dict[Key, int] = {}
        self.ended: list[Key] = []
        self.readers: dict[Key, asyncio.Task[None]] = {}
        self.data = asyncio.Event()
        self.discovery_done = False
        self.task: asyncio.Task[None] | None = None

    # readers ---------------------------------------------------------------------------------

    def push(self, key: Key, line: LogLine) -> None:
        if len(self.buffer) >= self.owner.buffer_lines:
            old = self.buffer.popleft()
            self.dropped[old.key] = self.dropped.get(old.key, 0) + 1
        self.buffer.append(_Entry(key, line))
        self.data.set()

    async def read(self, namespace: str, key: Key) -> None:
        req = self.request
        since_seconds = req.since_seconds
        if req.since is not None:
            since = req.since if req.since.tzinfo else req.since.replace(tzinfo=UTC)
            since_seconds = max(1, int((datetime.now(UTC) - since).total_seconds()))
        tail_lines = req.tail_lines
        last: datetime | None = None  # timestamp of the last line passed on
        try:
            for attempt in range(5):
                try:
                    async for raw in self.owner.kube.pod_log(
                        namespace,
                        key[0],
                        container=key[1],
                        follow=req.follow,
                        since_seconds=since_seconds,
                        tail_lines=tail_lines,
                        timestamps=True,
                    ):
                        line = parse_line(raw)
                        if (
                            last is not None
                            and line.timestamp is not None
                            and line.timestamp <= last
                        ):
                            continue  # seen before the stream broke
                        self.push(key, line)
                        last = line.timestamp or last
                    break
                except K8sError as exc:
                    log.info("log %s/%s: %s (attempt %d/5)", key[0], key[1], exc, attempt + 1)
                    await asyncio.sleep(0.2 * (attempt + 1))
                    if last is not None:
                        # Resume after the last line passed on, not from the beginning.
                        tail_lines = None
                        since_seconds = max(1, int((datetime.now(UTC) - last).total_seconds()) + 1)
        finally:
            self.ended.append(key)
            self.data.set()

    async def discover(self, namespace: str, name: str) -> None:
        req = self.request
        while True:
            for pod in self.owner.inventory.workload_pods(namespace, name):
                pod_name = str((pod.get("metadata") or {}).get("name"))
                if req.pod is not None and pod_name != req.pod:
                    continue
                for c in (pod.get("spec") or {}).get("containers") or []:
                    cname = str(c.get("name"))
                    if req.container is not None and cname != req.container:
                        continue
                    key = (pod_name, cname)
                    if key in self.readers or not _started(pod, cname):
                        continue
                    self.readers[key] = asyncio.create_task(self.read(namespace, key))
            if not req.follow or self.owner.finished(req.workload):
                # Without follow, what has started now is what there is; with follow, once
                # the workload is finished no pod will come or start any more.
                self.discovery_done = True
                self.data.set()
                return
            await asyncio.sleep(self.owner.poll_interval)

    # sender ----------------------------------------------------------------------------------

    def _frame(self, key: Key, lines: list[LogLine], *, eof: bool) -> LogData:
        return LogData(
            stream_id=self.request.stream_id,
            workload=self.request.workload,
            cluster=self.owner.cluster,
            pod=key[0],
            container=key[1],
            lines=lines,
            dropped=self.dropped.pop(key, 0),
            eof=eof,
        )

    async def run(self) -> None:
        namespace, name = self.request.workload.split("/", 1)
        discovery = asyncio.create_task(self.discover(namespace, name))
        try:
            while True:
                await self.data.wait()
                self.data.clear()
                await asyncio.sleep(self.owner.batch_interval)
                while self.buffer:
                    key = self.buffer[0].key
                    lines: list[LogLine] = []
                    while (
                        self.buffer
                        and self.buffer[0].key == key
                        and len(lines) < self.owner.batch_lines
                    ):
                        lines.append(self.buffer.popleft().line)
                    await self.owner.send(self._frame(key, lines, eof=False))
                while self.ended:
                    key = self.ended.pop(0)
                    if any(e.key == key for e in self.buffer):
                        self.ended.append(key)
                        break
                    await self.owner.send(self._frame(key, [], eof=True))
                if (
                    self.discovery_done
                    and not self.buffer
                    and not self.ended
                    and all(t.done() for t in self.readers.values())
                ):
                    await self.owner.send(self._frame(("", ""), [], eof=True))  # stream done
                    return
        finally:
            discovery.cancel()
            tasks = [discovery, *self.readers.values()]
            for task in tasks:
                task.cancel()
            # asyncio.wait never swallows a cancellation of this task (suppressing
            # CancelledError around `await task` would).
            await asyncio.wait(tasks)


class LogStreams:
    def __init__(
        self,
        *,
        cluster: str,
        kube: Kube,
        inventory: Inventory,
        send: Callable[[LogData], Awaitable[None]],
        buffer_lines: int = 10_000,
        batch_lines: int = 500,
        batch_interval: float = 0.1,
        poll_interval: float = 0.25,
        finished: Callable[[str], bool] = lambda _workload: False,
    ) -> None:
        self.cluster = cluster
        self.kube = kube
        self.inventory = inventory
        self.send = send
        self.buffer_lines = buffer_lines
        self.batch_lines = batch_lines
        self.batch_interval = batch_interval
        self.poll_interval = poll_interval
        self.finished = finished
        """Whether a workload (`namespace/name`) is done here: no pod will start any more."""
        self.streams: dict[str, _Stream] = {}

    async def handle(self, message: LogOpen | LogClose) -> None:
        if isinstance(message, LogOpen):
            await self._close(message.stream_id)
            stream = _Stream(self, message)
            self.streams[message.stream_id] = stream
            stream.task = asyncio.create_task(self._run(stream), name=f"logs {message.stream_id}")
        else:
            await self._close(message.stream_id)

    async def _run(self, stream: _Stream) -> None:
        try:
            await stream.run()
        except HubUnreachableError:
            log.info("log stream %s: the log lane is gone", stream.request.stream_id)
        finally:
            if self.streams.get(stream.request.stream_id) is stream:
                del self.streams[stream.request.stream_id]

    async def _close(self, stream_id: str) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is not None and stream.task is not None:
            stream.task.cancel()
            await asyncio.wait([stream.task])

    async def close_all(self) -> None:
        for stream_id in list(self.streams):
            await self._close(stream_id)
