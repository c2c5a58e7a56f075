"""Log streams: the ones the hub asks for (LogOpen), and the ones the agent ships unasked
before a finished workload's pods may go. Every container of every pod of a workload, read
with `read_namespaced_pod_log` (follow, since, tail), tagged with cluster, pod, container,
timestamp and a sequence number, batched into `LogData` frames on the log lane.

One `_Stream` per LogOpen (or ship): a discovery task starts a reader per (pod, container)
once the container has started (and, when following, keeps picking up pods that appear
later); readers append to one bounded buffer per stream. Nothing is dropped here: a reader
whose stream's buffer is full waits (it stops reading the API server's response, so the
backpressure ends in the kubelet's log file, which is where the lines are anyway). A sender
drains the buffer in batches of up to `batch_lines` lines of one (pod, container), awaiting
the lane (backpressure stays on the log lane, never the control lane). Each frame carries
the sequence number of its first line in its container's log (1-based, counted from where
the reader started: `from_start` when that was the log's start), so the hub counts any gap
exactly. When a reader ends the (pod, container) gets a frame with `eof=True`. The stream
ends — with a last frame `pod="", container="", eof=True` — once every reader ended and no
more can come: at once without follow, and with follow when the workload is finished here
(or not held at all). LogClose (or a lost lane) cancels it.

Shipping: once a workload is finished here (its pods stay until its Jobs are deleted: the hub
deleting the workload, or the Job's own TTL), the agent reads each container's log from the
start and sends what the hub does not have yet — lines no older than the newest it already
sent over this lane from a stream that read the log from its start — marked `shipped` with
the generation, up to `ship_limit_bytes` per workload; the eof of a container says how many
lines and bytes the limit left behind. The hub keeps shipped lines only from the cluster that
holds the generation's binding (docs/exactly-once.md).

A cancelled workload's logs are shipped the same way before its Jobs are deleted
(`ship_before_stop`, awaited by the admission shell's background stop, bounded; past the
bound the ship is cut off and its eof frames say how many lines it read and left behind).
An evicted or preempted one's ship starts just before its Jobs are deleted: the admission
loop waits only until the ship's reads hold the logs (`open_before_stop`, tightly bounded),
the Jobs go, and the ship reads on from the terminating pods (docs/logs.md).

Called by: agent.app (LogOpen/LogClose from the hub session's log lane; `watch_finished`);
agent.stopper (`open_before_stop`, `ship_before_stop`, through the hooks agent.app gives
it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import TypeAdapter

from agent.errors import HubUnreachableError, K8sError
from agent.inventory import Inventory
from agent.k8s.client import JsonObject, Kube
from agent.records import Record
from api.logstamps import InvalidStampError, canonical_stamp
from api.v1alpha1.messages import LogClose, LogData, LogLine, LogOpen

__all__ = ["LogStreams", "parse_line"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (pod, container)
SHIP_PREFIX = "ship/"
"""Stream ids of shipped streams start with this (the hub opens none like it)."""


def parse_line(raw: str) -> tuple[str | None, str]:
    """A `timestamps=true` log line: an RFC 3339 stamp, a space, the text. The stamp comes
    back canonical (api.logstamps: compared as text from here on, never parsed); a line
    without a stamp that reads as one comes back whole, stamped None."""
    stamp, sep, text = raw.partition(" ")
    if sep:
        try:
            return canonical_stamp(stamp), text
        except InvalidStampError:
            pass
    return None, raw


_LINES: TypeAdapter[list[LogLine]] = TypeAdapter(list[LogLine])
"""A frame's lines are made in one validation: a `LogLine` per line as it was read was the
agent's largest cost under a log flood."""


def _seconds_since(stamp: str) -> int:
    """Whole seconds from a canonical stamp to now, at least 1 (a read resumed `since`)."""
    then = datetime.fromisoformat(stamp)
    return max(1, int((datetime.now(UTC) - then).total_seconds()))


@dataclass(slots=True)
class _Entry:
    key: Key
    seq: int
    timestamp: str | None
    text: str


@dataclass(slots=True)
class _Ship:
    """A shipped stream's budget and what it left behind, per (pod, container)."""

    generation: int
    budget_bytes: int
    unshipped_lines: dict[Key, int] = field(default_factory=dict)
    """Over the budget, per (pod, container)."""
    unshipped_bytes: dict[Key, int] = field(default_factory=dict)
    cut_off_lines: dict[Key, int] = field(default_factory=dict)
    """Read and not sent when the ship was cut off, per (pod, container)."""
    cut_off_bytes: dict[Key, int] = field(default_factory=dict)


def _started(pod: JsonObject, container: str) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            state = cs.get("state") or {}
            return "running" in state or "terminated" in state
    return False


class _Stream:
    def __init__(self, owner: LogStreams, request: LogOpen, ship: _Ship | None = None) -> None:
        self.owner = owner
        self.request = request
        self.ship = ship
        self.from_start = (
            request.tail_lines is None and request.since is None and request.since_seconds is None
        )
        self.buffer: deque[_Entry] = deque()
        self.space = asyncio.Event()
        self.space.set()
        self.next_seq: dict[Key, int] = {}
        """Per (pod, container): the sequence number the next frame starts at."""
        self.ended: list[Key] = []
        self.eof_sent: set[Key] = set()
        self.readers: dict[Key, asyncio.Task[None]] = {}
        self.data = asyncio.Event()
        self.discovery_done = False
        self.unread: set[Key] = set()
        """Readers whose log read the API server has not answered yet (nor ended)."""
        self.holding = asyncio.Event()
        """Set once discovery is done and every reader's read was answered or ended: the log
        is then open and stays readable to its end while the pod goes (a kubelet reads the
        open log file, kubesim the container's log object), so the pods may be deleted."""
        self.task: asyncio.Task[None] | None = None

    # readers ---------------------------------------------------------------------------------

    def push_nowait(self, entry: _Entry) -> bool:
        """Append unless the buffer is full (False: await `push`). A reader calls this first:
        awaiting a coroutine per line costs ~0.1 µs more than a call, for nothing when the
        buffer has room (a coroutine that does not wait never yields to the loop)."""
        if len(self.buffer) >= self.owner.buffer_lines:
            return False
        self.buffer.append(entry)
        self.data.set()
        return True

    async def push(self, entry: _Entry) -> None:
        while len(self.buffer) >= self.owner.buffer_lines:
            self.space.clear()
            await self.space.wait()
        self.buffer.append(entry)
        self.data.set()

    def _admit(self, key: Key, timestamp: str | None, text: str) -> bool:
        """Whether a shipped stream sends this line: not sent to the hub before, and within
        the workload's budget (what is over it is counted, not sent)."""
        ship = self.ship
        if ship is None:
            return True
        sent = self.owner.sent_upto.get((self.request.workload, *key))
        if sent is not None and timestamp is not None and timestamp < sent:
            return False  # (one with the same timestamp goes: the hub tells them apart)
        size = len(text.encode()) + 1
        if size > ship.budget_bytes:
            ship.budget_bytes = 0  # later lines too: what is shipped is a prefix
            ship.unshipped_lines[key] = ship.unshipped_lines.get(key, 0) + 1
            ship.unshipped_bytes[key] = ship.unshipped_bytes.get(key, 0) + size
            return False
        ship.budget_bytes -= size
        return True

    def _got(self, key: Key) -> None:
        """The read of `key` was answered (or got a line, or ended)."""
        self.unread.discard(key)
        if self.discovery_done and not self.unread:
            self.holding.set()

    async def read(self, namespace: str, key: Key) -> None:
        req = self.request
        since_seconds = req.since_seconds
        if req.since is not None:
            since = req.since if req.since.tzinfo else req.since.replace(tzinfo=UTC)
            since_seconds = max(1, int((datetime.now(UTC) - since).total_seconds()))
        tail_lines = req.tail_lines
        count = 0  # lines read and passed on (or deliberately skipped) so far
        last: str | None = None  # timestamp of the last line passed on (canonical: ordered)
        ties = 0  # lines passed on with the timestamp `last` (one read may stamp several)
        skip = 0  # a read from the start again: lines read before it broke
        seen: str | None = None  # a read resumed by time: lines up to this were read...
        seen_ties = 0  # ...and this many of those with that very timestamp
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
                        opened=lambda: self._got(key),
                    ):
                        if key in self.unread:  # (its first line: no call for the rest)
                            self._got(key)
                        if skip:
                            skip -= 1  # read before the stream broke (from the start again)
                            continue
                        timestamp, text = parse_line(raw)
                        if seen is not None and timestamp is not None:
                            if timestamp < seen:
                                continue  # read before the stream broke
                            if timestamp == seen and seen_ties:
                                seen_ties -= 1
                                continue
                            seen = None  # past what was read
                        count += 1
                        if timestamp is not None and timestamp == last:
                            ties += 1
                        elif timestamp is not None:
                            last, ties = timestamp, 1
                        if self.ship is None or self._admit(key, timestamp, text):
                            entry = _Entry(key, count, timestamp, text)
                            if not self.push_nowait(entry):
                                await self.push(entry)
                    break
                except K8sError as exc:
                    log.info("log %s/%s: %s (attempt %d/5)", key[0], key[1], exc, attempt + 1)
                    await asyncio.sleep(0.2 * (attempt + 1))
                    if self.from_start:
                        # Read from the start again and skip what was read: the numbering
                        # stays exact (a timestamp can be shared by several lines).
                        skip = count
                    elif last is not None:
                        # Resume after the last line passed on, not from the beginning.
                        seen, seen_ties = last, ties
                        tail_lines = None
                        since_seconds = _seconds_since(last) + 1
        finally:
            self._got(key)
            self.ended.append(key)
            self.data.set()

    def _start_readers(self, namespace: str, name: str) -> None:
        """A reader for every container of the workload's pods that started and has none."""
        req = self.request
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
                self.unread.add(key)
                self.readers[key] = asyncio.create_task(self.read(namespace, key))

    def _discovered(self) -> bool:
        """Whether no reader can come any more (then the stream is told so): without follow,
        what has started now is what there is; with follow, once the workload is finished
        no pod will come or start any more."""
        if self.request.follow and not self.owner.finished(self.request.workload):
            return False
        self.discovery_done = True
        self._got(("", ""))
        self.data.set()
        return True

    async def discover(self, namespace: str, name: str) -> None:
        """Keeps starting readers as the workload's containers start, until none can come."""
        while True:
            self._start_readers(namespace, name)
            if self._discovered():
                return
            await asyncio.sleep(self.owner.poll_interval)

    # sender ----------------------------------------------------------------------------------

    def _frame(self, key: Key, entries: list[_Entry], *, eof: bool) -> LogData:
        ship = self.ship
        seq = entries[0].seq if entries else self.next_seq.get(key, 1)
        if entries:
            self.next_seq[key] = entries[-1].seq + 1
        # Built, not validated as a whole (as Envelope.wrap builds the envelope): its stamps
        # are canonical already (parse_line), and checking them again for the frame was a
        # tenth of the agent's work per line; the lines themselves are validated.
        return LogData.model_construct(
            stream_id=self.request.stream_id,
            workload=self.request.workload,
            cluster=self.owner.cluster,
            pod=key[0],
            container=key[1],
            lines=_LINES.validate_python(
                [{"timestamp": e.timestamp, "text": e.text} for e in entries]
            )
            if entries
            else [],
            eof=eof,
            seq=seq,
            from_start=self.from_start,
            shipped=ship is not None,
            generation=ship.generation if ship else None,
            unshipped_lines=ship.unshipped_lines.pop(key, 0) if ship and eof else 0,
            unshipped_bytes=ship.unshipped_bytes.pop(key, 0) if ship and eof else 0,
            cut_off_lines=ship.cut_off_lines.pop(key, 0) if ship and eof else 0,
            cut_off_bytes=ship.cut_off_bytes.pop(key, 0) if ship and eof else 0,
        )

    def cut_off(self) -> list[LogData]:
        """The stream is stopped before its end (its Jobs go): the eof of every container it
        read, counting the lines read and not sent as left behind (a lower bound: what was
        not read yet is not known), then the stream's own eof."""
        ship = self.ship
        frames: list[LogData] = []
        for key in self.readers:
            if key in self.eof_sent:
                continue
            if ship is not None:
                left = [e for e in self.buffer if e.key == key]
                ship.cut_off_lines[key] = ship.cut_off_lines.get(key, 0) + len(left)
                ship.cut_off_bytes[key] = ship.cut_off_bytes.get(key, 0) + sum(
                    len(e.text.encode()) + 1 for e in left
                )
            frames.append(self._frame(key, [], eof=True))
        self.buffer.clear()
        frames.append(self._frame(("", ""), [], eof=True))
        return frames

    async def _send(self, frame: LogData) -> None:
        await self.owner.send(frame)
        last = frame.lines[-1].timestamp if frame.lines else None
        if self.from_start and last is not None and frame.pod:
            # What the hub has from this log's start (it keeps such lines), so a ship later
            # sends only the rest.
            sent = (frame.workload, frame.pod, frame.container)
            known = self.owner.sent_upto.get(sent)
            self.owner.sent_upto[sent] = last if known is None else max(known, last)

    async def run(self) -> None:
        namespace, name = self.request.workload.split("/", 1)
        discovery: asyncio.Task[None] | None = None
        if self.request.follow:
            discovery = asyncio.create_task(self.discover(namespace, name))
        else:
            # One look is all there is to discovery (a ship of every finished workload, most
            # streams): done here, not in a task of its own.
            self._start_readers(namespace, name)
            self._discovered()
            if self.readers:
                # Nothing to send before a reader passes a line on or ends, which wakes the
                # sender: it need not wake for the discovery too (no reader ran yet).
                self.data.clear()
        try:
            while True:
                await self.data.wait()
                self.data.clear()
                await asyncio.sleep(self.owner.batch_interval)
                while self.buffer:
                    key = self.buffer[0].key
                    entries: list[_Entry] = []
                    while (
                        self.buffer
                        and self.buffer[0].key == key
                        and len(entries) < self.owner.batch_lines
                    ):
                        entries.append(self.buffer.popleft())
                    self.space.set()
                    await self._send(self._frame(key, entries, eof=False))
                while self.ended:
                    key = self.ended.pop(0)
                    if any(e.key == key for e in self.buffer):
                        self.ended.append(key)
                        break
                    await self._send(self._frame(key, [], eof=True))
                    self.eof_sent.add(key)
                if (
                    self.discovery_done
                    and not self.buffer
                    and not self.ended
                    and all(t.done() for t in self.readers.values())
                ):
                    await self._send(self._frame(("", ""), [], eof=True))  # stream done
                    return
        finally:
            tasks = [t for t in (discovery, *self.readers.values()) if t is not None]
            for task in tasks:
                task.cancel()
            # asyncio.wait never swallows a cancellation of this task (suppressing
            # CancelledError around `await task` would).
            if tasks:
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
        batch_interval: float = 0.02,
        poll_interval: float = 0.25,
        finished: Callable[[str], bool] = lambda _workload: False,
        ship_limit_bytes: int = 64 * 1024 * 1024,
        lane_up: Callable[[], bool] = lambda: True,
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
        self.ship_limit_bytes = ship_limit_bytes
        """At most this many bytes of a workload's lines are shipped unasked (0: none)."""
        self.lane_up = lane_up
        self.streams: dict[str, _Stream] = {}
        self.sent_upto: dict[tuple[str, str, str], str] = {}
        """(workload, pod, container) → the timestamp of the newest line sent over the current
        log lane by a stream that read from the log's start (forgotten with the lane: the hub
        may not have it)."""
        self.shipped: dict[str, int] = {}
        """workload → the generation whose logs were shipped (or are being shipped)."""
        self.shipping: dict[str, asyncio.Task[None]] = {}
        self._cut_offs: set[asyncio.Task[None]] = set()
        self._lane_resets = 0
        """How many times the lane was lost (`close_all`): `watch_finished` looks at every
        finished workload again after each."""

    async def handle(self, message: LogOpen | LogClose) -> None:
        if isinstance(message, LogOpen):
            await self._close(message.stream_id)
            self._start(_Stream(self, message))
        else:
            await self._close(message.stream_id)

    def _start(self, stream: _Stream) -> asyncio.Task[None]:
        self.streams[stream.request.stream_id] = stream
        stream.task = asyncio.create_task(
            self._run(stream), name=f"logs {stream.request.stream_id}"
        )
        return stream.task

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
        """The log lane is gone: every stream ends, and what was sent over it is forgotten."""
        for stream_id in list(self.streams):
            await self._close(stream_id)
        self.sent_upto.clear()
        self.shipped.clear()
        self._lane_resets += 1

    # shipping --------------------------------------------------------------------------------

    def ship(
        self, workload: str, generation: int, *, follow: bool = False
    ) -> asyncio.Task[None] | None:
        """Start shipping a workload's logs at `generation` (once per generation while the
        lane lasts); the task, or None when there is nothing to start. `follow`: read each
        container's log until it ends (its pods are being stopped: what it prints while it
        terminates is shipped too)."""
        if self.ship_limit_bytes <= 0 or not self.lane_up():
            return None
        if self.shipped.get(workload, 0) >= generation:
            return self.shipping.get(workload)
        self.shipped[workload] = generation
        stream_id = f"{SHIP_PREFIX}{generation}/{workload}"
        request = LogOpen(stream_id=stream_id, workload=workload, follow=follow)
        budget = _Ship(generation, self.ship_limit_bytes)
        task = self._start(_Stream(self, request, ship=budget))
        self.shipping[workload] = task
        task.add_done_callback(lambda t: self._shipped(workload, t))
        return task

    def _shipped(self, workload: str, task: asyncio.Task[None]) -> None:
        if self.shipping.get(workload) is task:
            del self.shipping[workload]

    async def open_before_stop(self, workload: str, generation: int, wait: float) -> bool:
        """An evicted workload's Jobs are about to be deleted: start shipping what the hub
        does not have yet, following each container's log until it ends (what it prints
        while it terminates is shipped too), and return once the API server answered every
        read (or after `wait` seconds: a log not opened by then may go with its pod);
        whether a ship is on (`ship_before_stop` then waits for it, bounded)."""
        task = self.ship(workload, generation, follow=True)
        if task is None or task.done():
            return False
        stream = self.streams.get(f"{SHIP_PREFIX}{generation}/{workload}")
        if stream is not None:
            holding = asyncio.create_task(stream.holding.wait())
            try:
                await asyncio.wait(
                    [task, holding], timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                holding.cancel()
        return True

    async def ship_before_stop(
        self,
        workload: str,
        generation: int,
        wait: float,
        hurry: asyncio.Event,
        *,
        jobs_gone: bool = False,
    ) -> None:
        """A cancelled workload's Jobs are about to be deleted (or, `jobs_gone`, an evicted
        one's were, its ship already on): ship what the hub does not have yet, for at most
        `wait` seconds (or until `hurry` is set: a withdrawal or a fence came meanwhile).
        Past that the ship is cut off and its eof frames say how many lines it left behind:
        sent in the background — or, `jobs_gone`, before this returns (within `wait` again),
        since the Evicted report that follows ends the binding the hub takes them under."""
        task = self.ship(workload, generation)
        if task is None or task.done():
            return
        hurried = asyncio.create_task(hurry.wait())
        try:
            await asyncio.wait([task, hurried], timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurried.cancel()
        if task.done():
            return
        stream = self.streams.get(f"{SHIP_PREFIX}{generation}/{workload}")
        task.cancel()
        await asyncio.wait([task])
        log.warning("shipping the logs of %s: cut off after %.1fs", workload, wait)
        if stream is not None:
            frames = stream.cut_off()
            if jobs_gone:
                await self._send_cut_off(frames, wait)
                return
            cut = asyncio.create_task(self._send_cut_off(frames, wait), name=f"cut {workload}")
            self._cut_offs.add(cut)
            cut.add_done_callback(self._cut_offs.discard)

    async def _send_cut_off(self, frames: list[LogData], wait: float) -> None:
        with contextlib.suppress(TimeoutError, HubUnreachableError):
            async with asyncio.timeout(wait):
                for frame in frames:
                    await self.send(frame)

    async def watch_finished(
        self,
        records: Callable[[], Mapping[str, Record]],
        take_finished: Callable[[], Iterable[str]],
    ) -> None:
        """Ship the logs of every workload that finished here, as it finishes (runs until
        cancelled). `take_finished`: the keys of `records` put finished since it was last
        called (agent.book.Book.take_finished), so a poll costs what finished, not what is
        held (an hour of finished workloads stays held); every record is looked at again
        only after the lane was lost, since what was shipped over it is forgotten then."""
        waiting: set[str] = set()
        looked_after_reset = -1
        while True:
            if looked_after_reset != self._lane_resets:
                looked_after_reset = self._lane_resets
                take_finished()  # (the whole look below covers them)
                waiting = set(records())
            else:
                waiting.update(take_finished())
            held = records()
            for key in list(waiting):
                record = held.get(key)
                if (
                    record is not None
                    and record.finished
                    and record.job_names
                    and self.shipped.get(key, 0) < record.generation
                    and self.ship(key, record.generation) is None
                    and self.ship_limit_bytes > 0
                ):
                    continue  # the lane is down: try again next time
                waiting.discard(key)
            await asyncio.sleep(self.poll_interval)
