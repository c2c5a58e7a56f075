"""The agents' side door: the two WebSocket lanes each member cluster's agent opens.

    GET /agent/v1/session?cluster=NAME   control lane: Hello, reports, offers, config
    GET /agent/v1/logs?cluster=NAME      log lane: LogOpen/LogClose down, LogData up

Both need the cluster's agent token. The control lane starts with the agent's Hello; the hub
answers with the full configuration and then reconciles what the agent holds with what the
hub wants. A newer session for the same cluster replaces an older one. When the control lane
closes the cluster is lost from that moment (MemberCluster.status.lostSince).

Called by: hub.app (routes). Delegates to hub.answers, hub.fleet, hub.loghub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from api.v1alpha1.messages import (
    CapacityReport,
    Hello,
    LeaseGrant,
    LeaseRenew,
    LogData,
    OfferRejected,
    WorkloadStatusReport,
)
from hub.answers import AgentAnswers
from hub.auth import Principal
from hub.config_push import ConfigPusher
from hub.errors import BadRequestError, ForbiddenError, NotFoundError
from hub.fleet import ClusterState, Fleet
from hub.http.middleware import PRINCIPAL
from hub.lanes import Lane, LaneClosedError
from hub.loghub import LogHub
from hub.metrics import UNCOUNTED, HubMetrics

__all__ = ["SessionRoutes"]

log = logging.getLogger(__name__)

HELLO_TIMEOUT_SECONDS = 10.0
# Reports of different workloads are applied concurrently (each waits for its own store
# write), those of one workload in the order they came; at most this many at once.
REPORTS_IN_FLIGHT = 256
CAPACITY_STATUS_EVERY_SECONDS = 5.0
"""MemberCluster.status.capacity is rewritten at most this often, but for news, shown at once:
a session's first capacity report, and one whose queues differ from those shown (the agent
applied a configuration with other queues). A cluster that just connected is ready for work
when its queues show."""
# aiohttp closes a connection whose pong is later than half of this: an agent busy admitting a
# deep queue on a loaded machine can stall for seconds, and cutting it off then (a reconnect,
# a Hello listing thousands of workloads) only adds load. Dead peers are still found in
# seconds, and fencing has its own, longer loss timeout.
HEARTBEAT_SECONDS = 20.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class SessionRoutes:
    fleet: Fleet
    answers: AgentAnswers
    config: ConfigPusher
    logs: LogHub
    clock: Callable[[], datetime] = _now
    metrics: HubMetrics = UNCOUNTED
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/agent/v1/session", self.control)
        app.router.add_get("/agent/v1/logs", self.log_lane)

    def _cluster_of(self, request: web.Request) -> ClusterState:
        principal: Principal = request[PRINCIPAL]
        if principal.kind != "agent":
            raise ForbiddenError("only member-cluster agents may open agent sessions")
        name = request.query.get("cluster", principal.name)
        if name != principal.name:
            raise ForbiddenError(f"this token belongs to cluster {principal.name}, not {name}")
        state = self.fleet.get(name)
        if state is None:
            raise NotFoundError(f"no MemberCluster named {name!r}")
        return state

    async def _accept(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS, max_msg_size=MAX_MESSAGE_BYTES)
        if not ws.can_prepare(request).ok:
            raise BadRequestError("this endpoint speaks WebSocket only")
        await ws.prepare(request)
        return ws

    async def control(self, request: web.Request) -> web.WebSocketResponse:
        state = self._cluster_of(request)
        ws = await self._accept(request)
        lane = Lane(ws, name=f"{state.name}/control", metrics=self.metrics)
        messages = lane.receive()
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_SECONDS):
                first = await anext(messages)
        except (TimeoutError, StopAsyncIteration):
            await lane.close()
            return ws
        if not isinstance(first.payload, Hello):
            log.warning("cluster %s: the first message was %s, not Hello", state.name, first.type)
            await lane.close()
            return ws
        if state.control is not None and not state.control.closed:
            log.info("cluster %s: a new session replaces the old one", state.name)
            await state.control.close()
        await self._on_hello(state, lane, first.payload)
        last_status_write: datetime | None = None  # none with this session's capacity yet
        queues_shown: set[tuple[str, str]] = set()
        reports = _PerWorkload(REPORTS_IN_FLIGHT)
        try:
            async for envelope in messages:
                now = self.clock()
                state.last_seen = now
                payload = envelope.payload
                if isinstance(payload, WorkloadStatusReport):
                    self.answers.on_status_received(state.name, payload)
                    await reports.run(
                        payload.workload,
                        self.answers.on_status(state.name, payload, envelope.trace_context),
                    )
                elif isinstance(payload, CapacityReport):
                    state.report_received(payload)
                    self.answers.on_capacity(state.name, payload)
                    queues = {(q.cluster_queue, q.flavor) for q in payload.queues}
                    if (
                        last_status_write is None
                        or queues != queues_shown
                        or (now - last_status_write).total_seconds()
                        >= CAPACITY_STATUS_EVERY_SECONDS
                    ):
                        last_status_write, queues_shown = now, queues
                        await self.fleet.write_status(state)
                elif isinstance(payload, OfferRejected):
                    await reports.run(
                        payload.workload, self.answers.on_rejected(state.name, payload)
                    )
                elif isinstance(payload, LeaseRenew):
                    self._grant(state, lane, payload)
                elif isinstance(payload, Hello):
                    await self._on_hello(state, lane, payload)
        finally:
            if state.control is lane:
                state.control = None
                state.lost_since = self.clock()
                log.warning("cluster %s: session closed; the cluster is lost", state.name)
                self.answers.on_disconnect(state.name)
                self.logs.on_disconnect(state.name)
                # aiohttp cancels a handler whose peer went away: finish the bookkeeping in a
                # task of its own so the loss is recorded even then.
                self._background(self.fleet.write_status(state))
            self._background(lane.close())
        return ws

    def _grant(self, state: ClusterState, lane: Lane, renew: LeaseRenew) -> None:
        """Renew the agent's lease from now (docs/exactly-once.md): the hub counts from when
        it received the renewal, the agent from when it sent it, so the agent's deadline is
        never later than the hub's. A cluster that left the fleet gets no lease."""
        if self.fleet.get(state.name) is not state or state.control is not lane:
            return
        state.renew_lease(self.clock())
        grant = LeaseGrant(
            id=renew.id,
            lease_seconds=int(state.lease_seconds),
            grace_seconds=int(state.grace_seconds),
            enabled=state.fencing,
        )
        with contextlib.suppress(LaneClosedError):
            lane.send(grant)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_hello(self, state: ClusterState, lane: Lane, hello: Hello) -> None:
        now = self.clock()
        state.control = lane
        state.connected_at = now
        state.last_seen = now
        state.lost_since = None
        state.agent_version = hello.agent_version
        state.kubernetes_version = hello.inventory.kubernetes_version or ""
        state.held = {h.workload: h for h in hello.workloads}
        state.config_revision = hello.config_revision
        log.info(
            "cluster %s: connected (agent %s, %d workloads held)",
            state.name,
            hello.agent_version,
            len(hello.workloads),
        )
        try:
            lane.send(self.config.build(state.name))
        except LaneClosedError:
            return
        await self.answers.reconcile_hello(state.name, hello)
        await self.fleet.write_status(state)

    async def log_lane(self, request: web.Request) -> web.WebSocketResponse:
        state = self._cluster_of(request)
        ws = await self._accept(request)
        lane = Lane(ws, name=f"{state.name}/logs", queue_size=1000, metrics=self.metrics)
        if state.logs is not None and not state.logs.closed:
            await state.logs.close()
        state.logs = lane
        try:
            async for envelope in lane.receive():
                if isinstance(envelope.payload, LogData):
                    self.logs.on_data(state.name, envelope.payload)
        finally:
            if state.logs is lane:
                state.logs = None
                self.logs.on_disconnect(state.name)
            self._background(lane.close())
        return ws


class _PerWorkload:
    """Runs each workload's reports in arrival order, different workloads' side by side:
    one at a time, a session could apply only as many reports per second as the store
    commits, and a deep queue's Pending answers would outlast the offer timeout."""

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._last: dict[str, asyncio.Task[None]] = {}

    async def run(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        await self._slots.acquire()  # backpressure: the lane stops reading when full
        previous = self._last.get(key)
        task = asyncio.get_running_loop().create_task(self._after(previous, work))
        self._last[key] = task
        task.add_done_callback(lambda t: self._done(key, t))

    async def _after(
        self, previous: asyncio.Task[None] | None, work: Coroutine[Any, Any, None]
    ) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)
        await work

    def _done(self, key: str, task: asyncio.Task[None]) -> None:
        self._slots.release()
        if self._last.get(key) is task:
            del self._last[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("applying a report of %s failed", key, exc_info=task.exception())
