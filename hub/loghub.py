"""Log fan-in: readers ask for a workload's logs; the hub asks the agent of the workload's
cluster to stream them on its log lane, and relays each batch to the reader, tagged with
cluster, pod and container. Every buffer is bounded: a slow reader loses the oldest lines
(and is told how many), it never slows the agent or the hub. A tail of each workload's recent
lines is kept so logs stay readable after a cluster is gone.

End of a stream: the agent sends `LogData(eof=True)` for each pod/container that ended, and
a final `LogData(pod="", container="", eof=True)` when the whole stream is done (all pods
finished, or, without follow, all logs sent).

Called by: hub.http.logs (open/read/close), hub.sessions (LogData from agents).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from api.v1alpha1.messages import LogClose, LogData, LogOpen
from hub.fleet import Fleet
from hub.lanes import LaneClosedError
from hub.metrics import UNCOUNTED, HubMetrics

__all__ = ["LogHub", "LogRequest"]

log = logging.getLogger(__name__)

READER_BUFFER_BATCHES = 1024
IDLE_END_SECONDS = 0.5
# Once the workload finished, how long a silent stream may still bring its last lines.
FINISHED_GRACE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class LogRequest:
    workload: str
    follow: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    pod: str | None = None
    container: str | None = None
    timestamps: bool = False


@dataclass
class _Stream:
    cluster: str
    workload: str
    queue: asyncio.Queue[LogData | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=READER_BUFFER_BATCHES)
    )
    dropped: int = 0


class LogHub:
    def __init__(
        self, fleet: Fleet, *, tail_lines: int = 1000, metrics: HubMetrics = UNCOUNTED
    ) -> None:
        self.fleet = fleet
        self.metrics = metrics
        self.tail_lines = tail_lines
        self._streams: dict[str, _Stream] = {}
        self.refused = 0
        """Log batches refused (see `on_data`)."""
        self._tails: dict[str, collections.deque[dict[str, Any]]] = {}

    # --- agent side ---------------------------------------------------------------------------

    def on_data(self, cluster: str, data: LogData) -> None:
        """Lines are taken only for a stream this hub opened, from the cluster it opened it
        on (the workload's cluster), for that workload: a cluster can neither answer for
        another nor add lines to a workload it does not run."""
        stream = self._streams.get(data.stream_id)
        if stream is None or stream.cluster != cluster or stream.workload != data.workload:
            self.refused += 1
            log.info(
                "cluster %s: log lines for %s on stream %s refused: not a stream opened there",
                cluster,
                data.workload,
                data.stream_id,
            )
            return
        self.metrics.log_in(line.text for line in data.lines)
        if data.lines:
            tail = self._tails.setdefault(data.workload, collections.deque(maxlen=self.tail_lines))
            for line in data.lines:
                tail.append(_record(cluster, data, line.text, line.timestamp))
        if stream.queue.full():
            dropped = stream.queue.get_nowait()
            stream.dropped += len(dropped.lines) if dropped else 0
            self.metrics.log_lines_dropped.inc(len(dropped.lines) if dropped else 0)
        stream.queue.put_nowait(data)

    def on_disconnect(self, cluster: str) -> None:
        for stream in self._streams.values():
            if stream.cluster == cluster:
                with contextlib.suppress(asyncio.QueueFull):
                    stream.queue.put_nowait(None)

    # --- reader side --------------------------------------------------------------------------

    def tail(self, workload: str, limit: int | None = None) -> list[dict[str, Any]]:
        lines = list(self._tails.get(workload, ()))
        return lines[-limit:] if limit else lines

    async def stream(
        self,
        cluster: str,
        request: LogRequest,
        *,
        finished: Callable[[], bool] = lambda: False,
    ) -> AsyncIterator[dict[str, Any]]:
        """Records from the cluster's agent until the stream ends or the cluster is lost.

        The stream ends on the agent's end-of-stream frame; failing that, once the workload
        has `finished` (or, without follow, at once) and every pod/container stream seen has
        sent its eof — or nothing came for FINISHED_GRACE_SECONDS — so a reader is never
        left hanging on a quiet agent.
        """
        state = self.fleet.get(cluster)
        if state is None or state.logs is None or state.logs.closed:
            return
        stream_id = uuid.uuid4().hex
        stream = _Stream(cluster, request.workload)
        # (pod, container) → still open; the stream may end once all have ended.
        open_streams: dict[tuple[str, str], bool] = {}
        idle = 0.0
        self._streams[stream_id] = stream
        try:
            state.logs.send(
                LogOpen(
                    stream_id=stream_id,
                    workload=request.workload,
                    follow=request.follow,
                    since_seconds=request.since_seconds,
                    tail_lines=request.tail_lines,
                    pod=request.pod,
                    container=request.container,
                    timestamps=True,
                )
            )
            while True:
                try:
                    async with asyncio.timeout(IDLE_END_SECONDS):
                        data = await stream.queue.get()
                except TimeoutError:
                    idle += IDLE_END_SECONDS
                    all_ended = bool(open_streams) and not any(open_streams.values())
                    if (finished() and (all_ended or idle >= FINISHED_GRACE_SECONDS)) or (
                        not request.follow and (all_ended or idle >= FINISHED_GRACE_SECONDS)
                    ):
                        return
                    continue
                idle = 0.0
                if data is None:
                    yield {
                        "cluster": cluster,
                        "event": "lost",
                        "message": f"lost the connection to cluster {cluster}",
                    }
                    return
                if stream.dropped:
                    yield {"cluster": cluster, "event": "dropped", "count": stream.dropped}
                    stream.dropped = 0
                self.metrics.log_out(line.text for line in data.lines)
                for line in data.lines:
                    yield _record(cluster, data, line.text, line.timestamp)
                if data.eof and not data.pod:
                    return
                if data.pod:
                    open_streams[(data.pod, data.container)] = not data.eof
        except LaneClosedError:
            return
        finally:
            self._streams.pop(stream_id, None)
            logs = state.logs
            if logs is not None and not logs.closed:
                with contextlib.suppress(LaneClosedError):
                    logs.send(LogClose(stream_id=stream_id, reason="reader finished"))


def _record(cluster: str, data: LogData, text: str, timestamp: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "cluster": cluster,
        "pod": data.pod,
        "container": data.container,
        "line": text,
    }
    if timestamp is not None:
        record["time"] = timestamp.isoformat()
    return record
