"""One WebSocket lane to an agent: numbered sends through a bounded queue, acks, and a
reader that hands each decoded envelope to the session.

A lane owns the seq/ack bookkeeping of one connection: `send` numbers and queues a payload
(a full queue means the agent cannot keep up and the lane is closed rather than the hub
blocking); a writer task drains the queue; every outgoing envelope acknowledges the highest
seq received, and a bare Ack goes out after a second of silence with input unacknowledged.

Called by: hub.sessions (one control lane and one log lane per connected cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from aiohttp import WSMsgType, web

from api.v1alpha1.messages import Ack, Envelope, MessageInvalidError, Payload, TraceContext
from hub.metrics import UNCOUNTED, HubMetrics

__all__ = ["Lane", "LaneClosedError"]

log = logging.getLogger(__name__)

ACK_AFTER_SECONDS = 1.0

_Queued = tuple[Envelope, Mapping[str, str] | None]
"""An envelope waiting to be written, with the members of its payload already encoded."""


class LaneClosedError(Exception):
    """The lane is closed; the message was not sent."""


class Lane:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        *,
        name: str,
        queue_size: int = 10_000,
        metrics: HubMetrics = UNCOUNTED,
    ) -> None:
        self.ws = ws
        self.name = name
        self.metrics = metrics
        self.kind = name.rsplit("/", 1)[-1]
        """`control` or `logs` (the lane label of the drop counter)."""
        self._queue: asyncio.Queue[_Queued | None] = asyncio.Queue(maxsize=queue_size)
        self._seq = 0
        self._received = 0
        self._unknown_fields: set[str] = set()
        """Paths of fields a newer agent sent that this hub ignored (each logged once)."""
        self._acked_received = 0
        self._closed = False
        self._writer = asyncio.create_task(self._write_loop(), name=f"lane-writer:{name}")
        self._acker = asyncio.create_task(self._ack_loop(), name=f"lane-acker:{name}")

    @property
    def closed(self) -> bool:
        return self._closed or self.ws.closed

    @property
    def backlog(self) -> int:
        """Envelopes queued and not yet written to the agent."""
        return self._queue.qsize()

    def send(
        self,
        payload: Payload,
        *,
        trace_context: TraceContext | None = None,
        encoded: Mapping[str, str] | None = None,
    ) -> None:
        """Queue `payload`; `trace_context`: the span that sent it, for the agent's spans;
        `encoded`: members of it the caller has as JSON already (`Envelope.to_json`)."""
        if self.closed:
            raise LaneClosedError(self.name)
        self._seq += 1
        envelope = Envelope.wrap(
            payload, seq=self._seq, ack=self._received or None, trace_context=trace_context
        )
        try:
            self._queue.put_nowait((envelope, encoded))
        except asyncio.QueueFull:
            log.warning("lane %s: the agent is not reading; closing the lane", self.name)
            self.metrics.lane_dropped.labels(self.kind, "overflow").inc()
            self.close_soon()
            raise LaneClosedError(self.name) from None

    async def receive(self) -> AsyncIterator[Envelope]:
        """Decoded envelopes until the peer closes; invalid frames are logged and skipped."""
        async for msg in self.ws:
            if msg.type != WSMsgType.TEXT:
                if msg.type == WSMsgType.ERROR:
                    log.info("lane %s: %s", self.name, self.ws.exception())
                continue
            try:
                envelope, unknown = Envelope.decode_from_peer(msg.data)
            except MessageInvalidError as exc:
                log.warning("lane %s: dropping an invalid message: %s", self.name, exc)
                self.metrics.lane_dropped.labels(self.kind, "invalid").inc()
                continue
            if unknown and not self._unknown_fields.issuperset(unknown):
                self._unknown_fields.update(unknown)
                log.warning(
                    "lane %s: the agent sends fields this hub does not know (a newer agent: "
                    "upgrade the hub); ignored: %s",
                    self.name,
                    ", ".join(sorted(unknown)),
                )
            if envelope.seq and envelope.seq <= self._received:
                continue  # a redelivery of something already handled
            self._received = max(self._received, envelope.seq)
            yield envelope

    async def close(self) -> None:
        self._closed = True
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
        self._acker.cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await asyncio.shield(self._writer)
        self._writer.cancel()
        if not self.ws.closed:
            await self.ws.close()

    def close_soon(self) -> None:
        """Close from code that cannot await (the close finishes in a task)."""
        self._closed = True
        asyncio.get_running_loop().create_task(self.ws.close())

    async def _write_loop(self) -> None:
        try:
            while True:
                queued = await self._queue.get()
                if queued is None or self.ws.closed:
                    return
                envelope, encoded = queued
                if self._received:
                    envelope.ack = self._received
                    self._acked_received = self._received
                await self.ws.send_str(envelope.to_json(encoded))
        except (ConnectionResetError, RuntimeError) as exc:
            log.info("lane %s: send failed: %s", self.name, exc)
            self._closed = True

    async def _ack_loop(self) -> None:
        while not self.closed:
            await asyncio.sleep(ACK_AFTER_SECONDS)
            if self._received > self._acked_received and self._queue.empty():
                with contextlib.suppress(LaneClosedError):
                    self._seq += 1
                    ack = Envelope.wrap(Ack(), seq=self._seq, ack=self._received)
                    self._queue.put_nowait((ack, None))
