"""The agent's session with the hub: two WebSocket lanes, sequence numbers and acks, an
outbox that survives disconnects, and reconnection with capped exponential backoff.

Lanes (both dialled with `Authorization: Bearer <token>` and `?cluster=<name>`, over wss when
the hub URL is https, its certificate checked against --certificate-authority; losing the
control lane closes both and redials both, losing only the log lane redials only it):
  control  GET {hub}/agent/v1/session — every message except log traffic;
  logs     GET {hub}/agent/v1/logs    — LogOpen/LogClose in, LogData out, so a saturated log
                                        stream can never delay a control message.

Several hubs (`--hub URL,URL,…`, sharing one store) have one leader, the only one that
serves agent sessions; the others refuse with 503 and name the leader in `X-MultiQ-Leader`.
The agent dials the leader it last knew first, then every listed hub in order, and goes
straight to a leader it is told of. After losing its session it is back within a second or
so for the first minute (`reconnect_quick_*`), however its backoff has grown: a change of
leader takes seconds, and dispatch to this cluster waits for it.

Each lane numbers the messages it sends from 1 per connection (`seq`) and acknowledges the
highest `seq` it received (`ack`, piggy-backed on every envelope). A bare `Ack` goes out when
input other than Acks has been unacknowledged for `ack_delay` with nothing else to send; it
is numbered like any message (as the hub's are). Envelopes whose `seq` is not above the
highest received are duplicates and dropped (their `ack` is still read).

On every connect Hello goes first (built by the `hello` callback), then `on_connect` runs
(the agent sends its capacity and queues the latest report of every held workload again),
then the outbox is flushed: status reports and rejections produced while disconnected
(latest per workload, bounded) and every one sent but not yet acknowledged. Redelivery is
harmless (reports are idempotent: latest phase per workload and generation).

Called by: agent.app (runs `HubSession.run`, sends through it); agent.logs (`send_log`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import aiohttp

from agent import retry
from agent.errors import HubError, HubNotLeaderError, HubRefusedError, HubUnreachableError
from agent.settings import AgentSettings
from api.v1alpha1.messages import (
    Ack,
    Envelope,
    Hello,
    LogClose,
    LogData,
    LogOpen,
    MessageInvalidError,
    OfferRejected,
    Payload,
    TraceContext,
    WorkloadStatusReport,
)

__all__ = ["CONTROL_PATH", "LEADER_HEADER", "LOGS_PATH", "HubSession", "Lane", "Outbox"]

log = logging.getLogger(__name__)

CONTROL_PATH = "/agent/v1/session"
LOGS_PATH = "/agent/v1/logs"
LEADER_HEADER = "X-MultiQ-Leader"

OutboxPayload = WorkloadStatusReport | OfferRejected


async def _until_one_ends(*coros: Coroutine[Any, Any, None]) -> None:
    """Run `coros` as tasks until one ends, stop the others, and raise what that one raised
    (HubUnreachableError when it just returned). Not a TaskGroup on purpose: on Python 3.11 a
    TaskGroup whose child fails while the caller is being cancelled raises the child's error,
    and catching it would swallow the cancellation (the caller would never stop)."""
    tasks = [asyncio.create_task(coro) for coro in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    raise HubUnreachableError("a lane task ended")


class Lane:
    """One WebSocket with its sequence and acknowledgement bookkeeping."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, name: str) -> None:
        self.ws = ws
        self.name = name
        self.seq = 0
        """Our last used sequence number (bare Acks are numbered too)."""
        self.received = 0
        """The peer's highest sequence number received (what `ack` carries)."""
        self.to_ack = 0
        """The peer's highest sequence number of a message that is not a bare Ack."""
        self.ack_sent = 0
        """The highest peer sequence number we acknowledged."""
        self.peer_acked = 0
        """Our highest sequence number the peer acknowledged."""
        self.unknown_fields: set[str] = set()
        """Paths of fields a newer hub sent that this agent ignored (each logged once)."""
        self._lock = asyncio.Lock()

    async def send(self, payload: Payload | Callable[[], Payload]) -> int:
        """Send `payload`; given as a function, it is made only once the lane is free, so it
        is no older than anything sent before it."""
        async with self._lock:
            self.seq += 1
            ack = self.received or None
            made = payload() if callable(payload) else payload
            env = Envelope.wrap(made, seq=self.seq, ack=ack)
            try:
                await self.ws.send_str(env.to_json())
            except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
                raise HubUnreachableError(f"{self.name} lane: send failed: {exc}") from exc
            self.ack_sent = max(self.ack_sent, ack or 0)
            return env.seq

    def accept(self, env: Envelope) -> bool:
        """Record an incoming envelope; True when it is news to act on (not a duplicate, not
        a bare Ack). Acks are never acknowledged, so two idle peers do not ping-pong."""
        if env.ack is not None and env.ack > self.peer_acked:
            self.peer_acked = env.ack
        if env.seq <= self.received:
            return False
        self.received = env.seq
        if isinstance(env.payload, Ack):
            return False
        self.to_ack = env.seq
        return True

    async def ack_loop(self, delay: float) -> None:
        while True:
            await asyncio.sleep(delay)
            if self.to_ack > self.ack_sent:
                await self.send(Ack())


@dataclass(slots=True)
class _Entry:
    payload: OutboxPayload
    sent_seq: int | None = None


class Outbox:
    """Latest report per workload, kept until the hub acknowledges it; bounded (oldest go).

    Every operation costs what it touches, not what is kept: the unsent keys and the sent
    ones (in send order) are indexed apart, since thousands of held workloads may be waiting
    for an acknowledgement while reports keep coming."""

    def __init__(self, limit: int = 100_000) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._unsent: dict[str, None] = {}  # keys, in the order they became unsent
        self._sent: collections.deque[tuple[int, str]] = collections.deque()
        self._limit = limit
        self.dropped = 0

    @staticmethod
    def _key(payload: OutboxPayload) -> str:
        return payload.workload

    def put(self, payload: OutboxPayload) -> None:
        key = self._key(payload)
        self._entries.pop(key, None)
        self._entries[key] = _Entry(payload)
        self._unsent.pop(key, None)
        self._unsent[key] = None
        while len(self._entries) > self._limit:
            dropped, _ = self._entries.popitem(last=False)
            self._unsent.pop(dropped, None)
            self.dropped += 1

    def unsent(self) -> list[OutboxPayload]:
        return [self._entries[k].payload for k in self._unsent]

    def mark_sent(self, payload: OutboxPayload, seq: int) -> None:
        key = self._key(payload)
        entry = self._entries.get(key)
        if entry is not None and entry.payload is payload:
            entry.sent_seq = seq
            self._unsent.pop(key, None)
            self._sent.append((seq, key))

    def acknowledge(self, upto: int) -> None:
        while self._sent and self._sent[0][0] <= upto:
            seq, key = self._sent.popleft()
            entry = self._entries.get(key)
            if entry is not None and entry.sent_seq == seq:
                del self._entries[key]

    def reset(self) -> None:
        """A new connection: everything not acknowledged is sent again."""
        for entry in self._entries.values():
            entry.sent_seq = None
        self._unsent = dict.fromkeys(self._entries)
        self._sent.clear()

    def __len__(self) -> int:
        return len(self._entries)


MessageHandler = Callable[[Payload, TraceContext | None, str], Awaitable[None]]
"""Called with every control message, the trace context its envelope carried and the text
the envelope came in."""


class HubSession:
    """Keeps both lanes connected; see the module docstring."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        hello: Callable[[], Hello],
        on_connect: Callable[[], Awaitable[None]],
        on_message: MessageHandler,
        on_log_message: Callable[[LogOpen | LogClose], Awaitable[None]],
        on_disconnect: Callable[[], Awaitable[None]] | None = None,
        on_logs_lost: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self._urls = settings.hub_urls
        self._hello = hello
        self._on_connect = on_connect
        self._on_message = on_message
        self._on_log_message = on_log_message
        self._on_disconnect = on_disconnect
        self._on_logs_lost = on_logs_lost
        self.outbox = Outbox()
        self.control: Lane | None = None
        self.logs: Lane | None = None
        self.connected = asyncio.Event()
        self.disconnected = asyncio.Event()
        """Set exactly when `connected` is not (so either can be awaited)."""
        self.disconnected.set()
        self.connections = 0
        self.hub_url: str | None = None
        """The hub this session is (or was last) connected to: the leader, when it is up."""
        self._wake_outbox = asyncio.Event()

    # sending ---------------------------------------------------------------------------------

    async def send(self, payload: Payload | Callable[[], Payload]) -> None:
        """Send on the control lane now (a function: made when the lane is free, `Lane.send`);
        raises HubUnreachableError when not connected."""
        lane = self.control
        if lane is None or not self.connected.is_set():
            raise HubUnreachableError("not connected")
        await lane.send(payload)

    def report(self, payload: OutboxPayload) -> None:
        """Queue a status report or rejection; delivered now or after the next Hello."""
        self.outbox.put(payload)
        self._wake_outbox.set()

    async def send_log(self, payload: LogData) -> None:
        lane = self.logs
        if lane is None or not self.connected.is_set():
            raise HubUnreachableError("not connected")
        await lane.send(payload)

    # the connection loop ---------------------------------------------------------------------

    def _reconnect_policy(self) -> Any:
        timings = self.settings.timings
        return retry.hub_reconnect(
            initial=timings.reconnect_initial,
            maximum=timings.reconnect_max,
            quick_max=timings.reconnect_quick_max,
            quick_for=timings.reconnect_quick_for,
        )

    async def run(self) -> None:
        """Connect, serve until a lane breaks, reconnect — until cancelled."""
        timings = self.settings.timings
        connector = aiohttp.TCPConnector(ssl=self._trust())
        async with aiohttp.ClientSession(connector=connector) as http:
            while True:
                policy = self._reconnect_policy()
                control, logs = await retry.call(policy, lambda: self._connect(http))
                try:
                    await self._serve(http, control, logs)
                except HubUnreachableError as exc:
                    log.warning("hub session lost: %s", exc)
                finally:
                    self.connected.clear()
                    self.disconnected.set()
                    self.control = None
                    with contextlib.suppress(Exception):
                        await control.close()
                    if self._on_disconnect is not None:
                        await self._on_disconnect()
                await asyncio.sleep(timings.reconnect_initial)

    def _trust(self) -> ssl.SSLContext | bool:
        """What an https hub's certificate is checked against: --certificate-authority, else
        the system's CAs (True)."""
        ca = self.settings.certificate_authority
        if ca is None:
            return True
        try:
            return ssl.create_default_context(cafile=str(ca))
        except (OSError, ssl.SSLError) as exc:
            raise HubError(f"cannot load the certificate authority {ca}: {exc}") from exc

    async def _dial(
        self, http: aiohttp.ClientSession, hub: str, path: str
    ) -> aiohttp.ClientWebSocketResponse:
        try:
            return await http.ws_connect(
                hub + path,
                headers={"Authorization": f"Bearer {self.settings.token}"},
                params={"cluster": self.settings.cluster},
                heartbeat=self.settings.timings.heartbeat,
                max_msg_size=64 * 1024 * 1024,
            )
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 503:
                leader = exc.headers.get(LEADER_HEADER) if exc.headers else None
                raise HubNotLeaderError(
                    f"{hub} does not lead" + (f"; the leader is {leader}" if leader else ""),
                    leader=leader.rstrip("/") if leader else None,
                ) from exc
            if exc.status in (401, 403):
                # A wrong token is an operator error, but the hub may be mid-rotation: keep
                # trying (with backoff) and say so loudly.
                log.error("hub refused the session (%s): check --token and --cluster", exc.status)
                raise HubUnreachableError(f"refused: {exc.status}") from HubRefusedError(
                    str(exc), status=exc.status
                )
            raise HubUnreachableError(f"{hub}{path}: handshake failed: {exc.status}") from exc
        except aiohttp.ClientConnectorCertificateError as exc:
            # Said once per dial, in one line: the operator must fix the trust, not wait.
            detail = getattr(exc.certificate_error, "verify_message", None) or str(exc)
            message = (
                f"{hub}: the hub's certificate is not trusted ({detail}); "
                "pass --certificate-authority with the CA that signed it"
            )
            log.error("%s", message)
            raise HubUnreachableError(message) from exc
        except aiohttp.ServerDisconnectedError as exc:
            plain = hub.startswith("http:")
            hint = " (if the hub serves TLS, use an https:// URL)" if plain else ""
            raise HubUnreachableError(f"{hub}{path}: {exc}{hint}") from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise HubUnreachableError(f"{hub}{path}: {type(exc).__name__}: {exc}") from exc

    async def _connect(
        self, http: aiohttp.ClientSession
    ) -> tuple[aiohttp.ClientWebSocketResponse, aiohttp.ClientWebSocketResponse]:
        """Both lanes to the leader: the hub connected last first, then every listed hub in
        order; a hub that does not lead but names the leader sends us there next. Raises the
        last failure when no hub accepted (HubNotLeaderError when some hub is up but none
        leads yet: an election is under way)."""
        queue = collections.deque(dict.fromkeys([*filter(None, [self.hub_url]), *self._urls]))
        tried: set[str] = set()
        failure: HubUnreachableError = HubUnreachableError("no hub URL to dial")
        not_leading: HubNotLeaderError | None = None
        while queue:
            hub = queue.popleft()
            if hub in tried:
                continue
            tried.add(hub)
            try:
                control = await self._dial(http, hub, CONTROL_PATH)
            except HubNotLeaderError as exc:
                not_leading = exc
                if exc.leader is not None and exc.leader not in tried:
                    queue.appendleft(exc.leader)
                continue
            except HubUnreachableError as exc:
                failure = exc
                continue
            try:
                logs = await self._dial(http, hub, LOGS_PATH)
            except HubUnreachableError as exc:
                await control.close()
                failure = exc
                continue
            if hub != self.hub_url:
                log.info("dialled the hub at %s", hub)
            self.hub_url = hub
            return control, logs
        raise not_leading or failure

    async def _serve(
        self,
        http: aiohttp.ClientSession,
        control_ws: aiohttp.ClientWebSocketResponse,
        logs_ws: aiohttp.ClientWebSocketResponse,
    ) -> None:
        control = Lane(control_ws, "control")
        self.control = control
        self.connections += 1
        # Hello is the first control message: nobody else may send before it is out.
        await control.send(self._hello())
        self.connected.set()
        self.disconnected.clear()
        await self._on_connect()
        self.outbox.reset()
        self._wake_outbox.set()
        await _until_one_ends(
            self._read(control, logs=False),
            control.ack_loop(self.settings.timings.ack_delay),
            self._flush_outbox(control),
            self._log_lane(http, logs_ws),
        )

    async def _log_lane(
        self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse
    ) -> None:
        """Serve the log lane while the control lane lives; when only the log lane breaks
        (a slow or restarted log consumer), redial it alone — control is never disturbed."""
        timings = self.settings.timings
        while True:
            lane = Lane(ws, "logs")
            self.logs = lane
            try:
                await _until_one_ends(self._read(lane, logs=True), lane.ack_loop(timings.ack_delay))
            except HubUnreachableError as exc:
                log.warning("log lane lost: %s", exc)
            finally:
                self.logs = None
                with contextlib.suppress(Exception):
                    await ws.close()
                if self._on_logs_lost is not None:
                    await self._on_logs_lost()
            assert self.hub_url is not None  # the control lane is up
            redial = functools.partial(self._dial, http, self.hub_url, LOGS_PATH)
            ws = await retry.call(self._reconnect_policy(), redial)

    async def _flush_outbox(self, lane: Lane) -> None:
        while True:
            await self._wake_outbox.wait()
            self._wake_outbox.clear()
            for payload in self.outbox.unsent():
                seq = await lane.send(payload)
                self.outbox.mark_sent(payload, seq)

    async def _read(self, lane: Lane, *, logs: bool) -> None:
        async for msg in lane.ws:
            if msg.type is not aiohttp.WSMsgType.TEXT:
                if msg.type is aiohttp.WSMsgType.ERROR:
                    break
                continue
            try:
                env, unknown = Envelope.decode_from_peer(msg.data)
            except MessageInvalidError as exc:
                log.error("%s lane: invalid message from the hub: %s", lane.name, exc)
                continue
            if unknown and not lane.unknown_fields.issuperset(unknown):
                lane.unknown_fields.update(unknown)
                log.warning(
                    "%s lane: the hub sends fields this agent does not know (a newer hub: "
                    "upgrade the agent to use them); ignored: %s",
                    lane.name,
                    ", ".join(sorted(unknown)),
                )
            fresh = lane.accept(env)
            if lane is self.control:
                self.outbox.acknowledge(lane.peer_acked)
            if not fresh:
                continue
            payload = env.payload
            if logs:
                if isinstance(payload, LogOpen | LogClose):
                    await self._on_log_message(payload)
                else:
                    log.error("logs lane: unexpected %s", env.type)
            elif isinstance(payload, LogOpen | LogClose):
                log.error("control lane: %s belongs on the logs lane; ignored", env.type)
            else:
                await self._on_message(payload, env.trace_context, msg.data)
        raise HubUnreachableError(f"{lane.name} lane closed by the hub")
