"""Log fan-in: readers ask for a workload's logs; the hub asks the agent of the workload's
cluster to stream them on its log lane, and relays each batch to the reader, tagged with
cluster, pod and container; every line the hub receives of a container's log from its start
is also kept in the durable `LogStore`, and so is what an agent ships unasked before a
finished workload's pods may go.

Nothing is lost silently. Each frame numbers its first line in its container's log; a
follower's stream tracks the next number it expects per (pod, container) and tells the reader
of any gap. A reader slower than its workload's output is never allowed to slow the agent or
the hub: its queue holds up to `follower_buffer_bytes` of lines (16 MiB by default), and past
that the oldest batches are dropped — and the reader gets, in their place, a record
`{"event": "dropped", "pod", "container", "count", "reason", "message"}` ("multiq: 1,234 lines
of pod/x container y dropped: follower too slow"). So a reader that keeps up with the
producer loses nothing, and one slower loses lines only once it is that far behind.

One agent stream serves every follower of a workload that reads the whole log as it grows
(follow, no tail, since, pod or container): the first such follower opens it, the hub
validates, stores and encodes each of its frames once, and hands the same bytes to every
follower's queue. A follower arriving later catches up from the store — exactly the lines the
shared stream brought so far (the store numbers them as the agent did), read up to that point
— then takes the live frames from the moment it joined: no gap and no line twice. When the
store cannot say that exactly (a line was not kept, another source wrote between), the late
follower gets a stream of its own, which later followers share in turn. Readers with a tail,
since, pod or container, and those that do not follow, get a stream of their own as before.

End of a stream: the agent sends `LogData(eof=True)` for each pod/container that ended, and
a final `LogData(pod="", container="", eof=True)` when the whole stream is done (all pods
finished, or, without follow, all logs sent).

Who may send lines (docs/exactly-once.md): a frame of a stream is taken only from the cluster
the hub opened it on, for that workload; a shipped frame only from the cluster that holds the
binding of the frame's generation; lines are stored only while the sender holds the binding.

Called by: hub.http.logs (open/read/close, stored reads), hub.sessions (LogData from agents).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import to_json

from api.logstamps import stamp_of
from api.v1alpha1.messages import LogClose, LogData, LogOpen
from hub.fleet import Fleet
from hub.lanes import LaneClosedError
from hub.logstore import LogStore, StoredLine, StreamName
from hub.metrics import UNCOUNTED, HubMetrics

__all__ = ["Binding", "LogHub", "LogRequest", "dropped_record"]

log = logging.getLogger(__name__)

FOLLOWER_BUFFER_BYTES = 16 * 1024 * 1024
CATCH_UP_BATCH_LINES = 2000
"""A late follower's catch-up from the store goes out in writes of this many records."""
IDLE_END_SECONDS = 0.5
# Once the workload finished, how long a silent stream may still bring its last lines.
FINISHED_GRACE_SECONDS = 5.0
SWEEP_INTERVAL_SECONDS = 600.0

Binding = Callable[[str], tuple[str | None, int | None]]
"""workload → (the cluster that holds its binding, its dispatch generation)."""


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
    """One reader's stream: a queue bounded in bytes, and what was dropped from it."""

    cluster: str
    workload: str
    limit_bytes: int
    queue: deque[_Frame | None] = field(default_factory=deque)
    queued_bytes: int = 0
    dropped: dict[tuple[str, str], int] = field(default_factory=dict)
    dropped_upto: dict[tuple[str, str], int] = field(default_factory=dict)
    """Per (pod, container): the sequence number after the last line dropped."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, frame: _Frame | None) -> int:
        """Queue a frame (None: the cluster is lost); returns the lines dropped for room."""
        size = _size(frame)
        lost = 0
        # (A frame without lines takes no room and pushes nothing out.)
        while size and self.queue and self.queued_bytes + size > self.limit_bytes:
            old = self.queue.popleft()
            self.queued_bytes -= _size(old)
            if old is not None and old.data.lines:
                data = old.data
                key = (data.pod, data.container)
                self.dropped[key] = self.dropped.get(key, 0) + len(data.lines)
                lost += len(data.lines)
                if data.seq:
                    self.dropped_upto[key] = data.seq + len(data.lines)
        self.queue.append(frame)
        self.queued_bytes += size
        self.ready.set()
        return lost

    async def get(self) -> _Frame | None:
        while not self.queue:
            self.ready.clear()
            await self.ready.wait()
        frame = self.queue.popleft()
        self.queued_bytes -= _size(frame)
        return frame


Key = tuple[str, str]  # (pod, container)


@dataclass
class _Source:
    """One agent stream and the followers' queues it feeds (one, unless shared)."""

    stream_id: str
    cluster: str
    workload: str
    followers: list[_Stream] = field(default_factory=list)
    next_seq: dict[Key, int] = field(default_factory=dict)
    """Per (pod, container): the number of the next line, after those it brought."""
    open: dict[Key, bool] = field(default_factory=dict)
    """Per (pod, container) seen: whether its reader is still on (no eof yet)."""
    kept_generation: int | None = None
    """The generation the lines it brought were stored under (None: none stored yet)."""
    all_kept: bool = True
    """Every line it brought was stored, under that one generation."""
    ended: bool = False

    def brought(self, data: LogData) -> None:
        if not data.pod:
            self.ended = self.ended or data.eof
            return
        key = (data.pod, data.container)
        if data.lines:
            self.next_seq[key] = data.seq + len(data.lines)
        self.open[key] = not data.eof


@dataclass(frozen=True, slots=True)
class _Frame:
    """A frame as every follower of its stream gets it: its lines encoded once."""

    data: LogData
    encoded: bytes
    text_bytes: int = 0
    """The bytes of its lines' text (what the log byte counters count)."""


def _size(frame: _Frame | None) -> int:
    return 0 if frame is None else len(frame.encoded)


def dropped_record(
    cluster: str, pod: str, container: str, count: int, reason: str
) -> dict[str, Any]:
    """The record a reader gets in place of lines it will not see."""
    return {
        "cluster": cluster,
        "pod": pod,
        "container": container,
        "event": "dropped",
        "count": count,
        "reason": reason,
        "message": f"multiq: {count:,} lines of pod/{pod} container {container} dropped: {reason}",
    }


class LogHub:
    def __init__(
        self,
        fleet: Fleet,
        store: LogStore,
        *,
        binding: Binding = lambda _workload: (None, None),
        follower_buffer_bytes: int = FOLLOWER_BUFFER_BYTES,
        metrics: HubMetrics = UNCOUNTED,
    ) -> None:
        self.fleet = fleet
        self.store = store
        self.binding = binding
        self.follower_buffer_bytes = follower_buffer_bytes
        self.metrics = metrics
        self._sources: dict[str, _Source] = {}
        """stream id → the agent stream and the followers it feeds."""
        self._shared: dict[tuple[str, str], _Source] = {}
        """(cluster, workload) → the shared stream a plain follower joins."""
        self.refused = 0
        """Log batches refused (see `on_data`)."""
        self.stored_lines = 0
        self._sweeper: asyncio.Task[None] | None = None

    # --- agent side ---------------------------------------------------------------------------

    def on_data(self, cluster: str, data: LogData) -> None:
        """Lines are taken only for a stream this hub opened, from the cluster it opened it
        on (the workload's cluster), for that workload — or, shipped, from the cluster bound
        at the frame's generation: a cluster can neither answer for another nor add lines to
        a workload it does not run."""
        if data.shipped:
            bound, generation = self.binding(data.workload)
            if bound != cluster or generation is None or generation != data.generation:
                self._refuse(cluster, data, "its cluster does not hold that generation")
                return
            self._keep(cluster, generation, data)
            return
        source = self._sources.get(data.stream_id)
        if source is None or source.cluster != cluster or source.workload != data.workload:
            self._refuse(cluster, data, "not a stream opened there")
            return
        text_bytes = len("".join([line.text for line in data.lines]).encode())  # (one encode)
        self.metrics.log_bytes.labels("in").inc(text_bytes)
        bound, generation = self.binding(data.workload)
        kept = bound == cluster and generation is not None
        if kept and generation is not None:
            self._keep(cluster, generation, data)
        if data.lines and data.from_start and data.seq:
            if kept and source.kept_generation in (None, generation):
                source.kept_generation = generation
            else:
                source.all_kept = False
        source.brought(data)
        if source.ended:
            self._unshare(source)
        # Encoded once, the same bytes queued for every follower.
        frame = _Frame(data, encode_lines(cluster, data), text_bytes)
        for follower in source.followers:
            lost = follower.put(frame)
            if lost:
                self.metrics.log_lines_dropped.inc(lost)

    def _refuse(self, cluster: str, data: LogData, why: str) -> None:
        self.refused += 1
        log.info(
            "cluster %s: log lines for %s on stream %s refused: %s",
            cluster,
            data.workload,
            data.stream_id,
            why,
        )

    def _keep(self, cluster: str, generation: int, data: LogData) -> None:
        """Store what a frame adds to its container's log from the start."""
        if not data.pod:
            if data.shipped and data.eof:
                self.store.complete(data.workload, generation)
            return
        name = StreamName(data.workload, generation, cluster, data.pod, data.container)
        if data.from_start and data.seq and data.lines:
            lines = [StoredLine(line.text, line.timestamp) for line in data.lines]
            self.stored_lines += self.store.append(name, data.stream_id, data.seq, lines)
        if data.unshipped_lines:
            self.store.mark(
                name,
                f"multiq: {data.unshipped_lines:,} lines ({data.unshipped_bytes:,} bytes) of "
                f"pod/{data.pod} container {data.container} not kept: over the agent's "
                "log ship limit",
            )
        if data.cut_off_lines:
            self.store.mark(
                name,
                f"multiq: {data.cut_off_lines:,} lines ({data.cut_off_bytes:,} bytes) of "
                f"pod/{data.pod} container {data.container} not kept: the agent's ship was "
                "cut off by its time bound as the pods went (lines it had not read yet are "
                "not counted)",
            )

    def on_disconnect(self, cluster: str) -> None:
        for source in list(self._sources.values()):
            if source.cluster == cluster:
                source.ended = True
                self._unshare(source)
                for follower in source.followers:
                    follower.put(None)

    def _unshare(self, source: _Source) -> None:
        """No follower joins `source` any more (it ended, or has no follower left)."""
        if self._shared.get((source.cluster, source.workload)) is source:
            del self._shared[(source.cluster, source.workload)]

    # --- housekeeping -------------------------------------------------------------------------

    def start(self) -> None:
        """Begin the store's retention sweeps (every SWEEP_INTERVAL_SECONDS)."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.wait([self._sweeper])
            self._sweeper = None

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.store.sweep)
            except OSError as exc:
                log.warning("log store retention sweep failed: %s", exc)
            await asyncio.sleep(SWEEP_INTERVAL_SECONDS)

    # --- reader side --------------------------------------------------------------------------

    async def stored(self, request: LogRequest) -> list[dict[str, Any]]:
        """What the store has of the workload's latest generation, read in a worker thread:
        a long log (hundreds of thousands of lines) must not hold up the event loop, which
        may append to it meanwhile (the read stops before a line being written)."""
        since = None
        if request.since_seconds is not None:
            cutoff = datetime.now(UTC) - timedelta(seconds=request.since_seconds)
            since = stamp_of(cutoff)
        return await asyncio.to_thread(
            self.store.read,
            request.workload,
            tail_lines=request.tail_lines,
            pod=request.pod,
            container=request.container,
            since=since,
        )

    def complete(self, workload: str) -> bool:
        """Whether the store has all its agent shipped of the workload's bound generation."""
        _, generation = self.binding(workload)
        return generation is not None and self.store.is_complete(workload, generation)

    async def stream(
        self,
        cluster: str,
        request: LogRequest,
        *,
        finished: Callable[[], bool] = lambda: False,
    ) -> AsyncGenerator[bytes, None]:
        """Batches of records, as newline-delimited JSON, from the cluster's agent until the
        stream ends or the cluster is lost.

        The stream ends on the agent's end-of-stream frame; failing that, once the workload
        has `finished` (or, without follow, at once) and every pod/container stream seen has
        sent its eof — or nothing came for FINISHED_GRACE_SECONDS — so a reader is never
        left hanging on a quiet agent.
        """
        state = self.fleet.get(cluster)
        if state is None or state.logs is None or state.logs.closed:
            return
        stream = _Stream(cluster, request.workload, self.follower_buffer_bytes)
        try:
            source, catch_up = self._attach(cluster, request, stream)
        except LaneClosedError:
            return
        # What the follower has of each (pod, container): the next line it expects, and
        # whether its reader is still on (the stream may end once all have ended). A late
        # follower starts where the shared stream was when it joined.
        expected = dict(source.next_seq)
        open_streams = dict(source.open)
        idle = 0.0
        try:
            if catch_up:
                records = await asyncio.to_thread(
                    self.store.read,
                    request.workload,
                    generation=source.kept_generation,
                    upto=catch_up,
                )
                for start in range(0, len(records), CATCH_UP_BATCH_LINES):
                    yield encode_records(records[start : start + CATCH_UP_BATCH_LINES])
            while True:
                try:
                    async with asyncio.timeout(IDLE_END_SECONDS):
                        frame = await stream.get()
                except TimeoutError:
                    idle += IDLE_END_SECONDS
                    all_ended = bool(open_streams) and not any(open_streams.values())
                    if (finished() and (all_ended or idle >= FINISHED_GRACE_SECONDS)) or (
                        not request.follow and (all_ended or idle >= FINISHED_GRACE_SECONDS)
                    ):
                        return
                    continue
                idle = 0.0
                if frame is None:
                    yield encode_records(
                        [
                            {
                                "cluster": cluster,
                                "event": "lost",
                                "message": f"lost the connection to cluster {cluster}",
                            }
                        ]
                    )
                    return
                data = frame.data
                notes = list(_notes(cluster, stream, data, expected))
                self.metrics.log_bytes.labels("out").inc(frame.text_bytes)
                chunk = encode_records(notes) + frame.encoded if notes else frame.encoded
                if chunk:
                    yield chunk
                if data.eof and not data.pod:
                    return
                if data.pod:
                    open_streams[(data.pod, data.container)] = not data.eof
        finally:
            source.followers.remove(stream)
            if not source.followers:
                self._unshare(source)
                del self._sources[source.stream_id]
                logs = state.logs
                if logs is not None and not logs.closed:
                    with contextlib.suppress(LaneClosedError):
                        logs.send(LogClose(stream_id=source.stream_id, reason="reader finished"))

    def _attach(
        self, cluster: str, request: LogRequest, follower: _Stream
    ) -> tuple[_Source, dict[tuple[str, str, str], int]]:
        """The agent stream `follower` reads, and what it must first read from the store:
        per stored (cluster, pod, container), the last line to read there (none when it
        reads the stream from its start: it opened it, or joined before a line came)."""
        whole = (
            request.follow
            and request.tail_lines is None
            and request.since_seconds is None
            and request.pod is None
            and request.container is None
        )
        joined = self._shared.get((cluster, request.workload)) if whole else None
        if joined is not None:
            catch_up = self._catch_up(joined)
            if catch_up is not None:
                joined.followers.append(follower)
                return joined, catch_up
        state = self.fleet.get(cluster)
        if state is None or state.logs is None:
            raise LaneClosedError(cluster)
        source = _Source(uuid.uuid4().hex, cluster, request.workload)
        state.logs.send(
            LogOpen(
                stream_id=source.stream_id,
                workload=request.workload,
                follow=request.follow,
                since_seconds=request.since_seconds,
                tail_lines=request.tail_lines,
                pod=request.pod,
                container=request.container,
                timestamps=True,
            )
        )
        self._sources[source.stream_id] = source
        source.followers.append(follower)
        if whole:
            self._shared[(cluster, request.workload)] = source
        return source, {}

    def _catch_up(self, source: _Source) -> dict[tuple[str, str, str], int] | None:
        """What a follower joining `source` now reads from the store first, so that with the
        frames that come after it has exactly what the stream brought from its start: {}
        when it brought no line yet; None when the store does not hold exactly those lines
        (one was not kept, or the store has lines it did not bring)."""
        if not source.next_seq:
            return {}
        if not source.all_kept or source.kept_generation is None:
            return None
        stored = self.store.counts(source.workload, source.kept_generation)
        brought = {
            (source.cluster, pod, container): after - 1
            for (pod, container), after in source.next_seq.items()
        }
        return stored if stored == brought else None


def _notes(
    cluster: str, stream: _Stream, data: LogData, expected: dict[tuple[str, str], int]
) -> Iterator[dict[str, Any]]:
    """What the reader must be told before this frame's lines: lines dropped from its queue
    (it read too slowly), and lines missing between the last frame of the container and this
    one (never read from the cluster)."""
    for (pod, container), count in stream.dropped.items():
        yield dropped_record(cluster, pod, container, count, "follower too slow")
    stream.dropped.clear()
    for key, upto in stream.dropped_upto.items():
        expected[key] = max(expected.get(key, 0), upto)
    stream.dropped_upto.clear()
    if not data.pod or not data.seq:
        return
    key = (data.pod, data.container)
    want = expected.get(key)
    if want is not None and data.seq > want:
        # Lines dropped from the queue are counted above; only a real gap is left here.
        yield dropped_record(
            cluster, data.pod, data.container, data.seq - want, "not read from the cluster"
        )
    expected[key] = data.seq + len(data.lines)


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode_records(records: list[dict[str, Any]]) -> bytes:
    encode = _ENCODER.encode
    return "".join(encode(r) + "\n" for r in records).encode()


def encode_lines(cluster: str, data: LogData) -> bytes:
    """The frame's lines as the log route sends them, one JSON object a line:
    `{"cluster","pod","container","line","time","seq"}` (time and seq when known). Built by
    hand, once per frame for all its followers: it is most of the hub's work per line."""
    if not data.lines:
        return b""
    quote = _ENCODER.encode
    head = (
        f'{{"cluster":{quote(cluster)},"pod":{quote(data.pod)},'
        f'"container":{quote(data.container)},"line":"'
    )
    out = []
    for n, (line, text) in enumerate(zip(data.lines, _quoted(data), strict=True), start=data.seq):
        # (A stamp is canonical, api.logstamps: nothing in it needs escaping.)
        when = f',"time":"{line.timestamp}"' if line.timestamp else ""
        seq = f',"seq":{n}' if data.seq else ""
        out.append(f'{head}{text}"{when}{seq}}}\n')
    return "".join(out).encode()


def _quoted(data: LogData) -> list[str]:
    """Each line's text escaped for a JSON string, without its quotes: the frame's texts in
    one serializer call (a call per line was the most of `encode_lines`). In the array it
    writes, `","` occurs only between two strings: a quote inside one is escaped. (A text
    holds no lone surrogate: the hub's JSON decoding refuses one.)"""
    return to_json([line.text for line in data.lines]).decode()[2:-2].split('","')
