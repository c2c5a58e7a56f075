"""What a hub that does not lead does with requests only the leader may serve: it forwards
writes to the leader and refuses agent sessions, naming the leader.

    POST, PUT, PATCH, DELETE on the REST API and submissions   forwarded to the leader
    GET …/workloads/{name}/log                                 forwarded (live logs come over
                                                               the leader's agent sessions)
    /agent/v1/*                                                503, a Status body and
                                                               `X-MultiQ-Leader: <url>`
    anything else (GET, list, watch, /readyz, …)               served here, from the store

Forwarding is a transparent reverse proxy: the method, path, query, body and headers
(Authorization included) go to the leader as they came, and its answer — status, headers,
body, streamed as it comes — goes back as it came. Callers therefore need no idea of who
leads: any live hub serves any request. A request that arrives while no leader is known
(an election is under way) waits for one, up to `forward_wait_seconds`; if this hub wins
meanwhile, it serves the request itself.

Every forwarded request carries `X-MultiQ-Forwarded-By`; a hub that gets one and does not
lead waits a moment for its own leadership (the sender may have seen the election's outcome
first) and then serves it or refuses it — it never forwards it again, so stale views of who
leads cannot make a loop. A request is sent again to a newer leader only when the first
attempt could not even connect (nothing reached the old one); once sent, its outcome is the
leader's answer or, if the leader died meanwhile, a 503 saying the outcome is unknown.
A leader served over https is trusted by `--certificate-authority` (else the system's CAs).

Called by: hub.app (installs the middleware after authentication, so only authenticated
callers are forwarded or told where the leader is).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Middleware
from yarl import URL

from hub.errors import SettingsError, UnavailableError, status_body
from hub.http.streams import STREAMS
from hub.role import Role

__all__ = ["FORWARDED_BY_HEADER", "LEADER_HEADER", "LeaderRouting"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LEADER_HEADER = "X-MultiQ-Leader"
FORWARDED_BY_HEADER = "X-MultiQ-Forwarded-By"
AGENT_PREFIX = "/agent/v1/"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# How long an agent's dial waits for this hub to finish becoming the leader, or for a leader
# to be known, before it is refused (it dials again within a second).
AGENT_WAIT_SECONDS = 1.0
CONNECT_TIMEOUT_SECONDS = 2.0
# Hop-by-hop headers (RFC 9110 §7.6.1) and those aiohttp sets itself from the body.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


# Failures that mean nothing of the request reached the leader: safe to send it again.
_NOT_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


def _needs_leader(request: web.Request) -> bool:
    if request.method not in READ_METHODS:
        return True
    return request.path.endswith("/log") and "/workloads/" in request.path


def _unavailable(message: str, leader: str | None) -> web.Response:
    headers = {LEADER_HEADER: leader} if leader else None
    return web.json_response(status_body(UnavailableError(message)), status=503, headers=headers)


class LeaderRouting:
    """The middleware and the HTTP client it forwards with (`start`/`close` with the app)."""

    def __init__(
        self,
        role: Role,
        *,
        forward_wait_seconds: float,
        certificate_authority: Path | None = None,
    ) -> None:
        self.role = role
        self.forward_wait_seconds = forward_wait_seconds
        self.certificate_authority = certificate_authority
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        trust: ssl.SSLContext | bool = True  # the system's CAs, for a leader behind https
        if self.certificate_authority is not None:
            try:
                trust = ssl.create_default_context(cafile=str(self.certificate_authority))
            except (OSError, ssl.SSLError) as exc:
                raise SettingsError(
                    f"cannot load the certificate authority {self.certificate_authority}: {exc}"
                ) from exc
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=trust),
            auto_decompress=False,  # bytes pass through as the leader sent them
            timeout=aiohttp.ClientTimeout(
                total=None, connect=CONNECT_TIMEOUT_SECONDS, sock_read=None
            ),
        )

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    @property
    def middleware(self) -> Middleware:
        @web.middleware
        async def leader_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            if self.role.leading:
                return await handler(request)
            if request.path.startswith(AGENT_PREFIX):
                return await self._refuse_agent(request, handler)
            if _needs_leader(request):
                return await self._forward(request, handler)
            return await handler(request)

        return leader_middleware

    async def _refuse_agent(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            leader = await self.role.leader_elsewhere(AGENT_WAIT_SECONDS)
        except TimeoutError:
            return _unavailable("this hub does not lead and no leader is known yet", None)
        if leader is None:
            return await handler(request)
        return _unavailable(f"this hub does not lead; the leader is {leader}", leader)

    async def _forward(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if FORWARDED_BY_HEADER in request.headers:
            return await self._serve_forwarded(request, handler)
        body = await request.read()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.forward_wait_seconds
        while True:
            try:
                leader = await self.role.leader_elsewhere(max(0.0, deadline - loop.time()))
            except TimeoutError:
                return _unavailable(
                    f"this hub does not lead and no leader answered within "
                    f"{self.forward_wait_seconds:g}s; try again",
                    None,
                )
            if leader is None:
                return await handler(request)
            try:
                return await self._proxy(request, leader, body)
            except _NOT_SENT as exc:
                # Nothing reached the leader: safe to send again once a leader is known.
                log.info("forwarding to %s failed (%s); waiting for the leader", leader, exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        while self.role.leader_url == leader and not self.role.leading:
                            await self.role.changed()

    async def _serve_forwarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A request another hub forwarded to us, taking us for the leader. We may be about to
        lead (views of the election differ by moments): wait for that, then serve it. Never
        forward it again: stale views must not make a loop."""
        try:
            await self.role.until_leading(self.forward_wait_seconds)
        except TimeoutError:
            leader = self.role.leader_url if self.role.leader_url != self.role.url else None
            return _unavailable(
                "this hub does not lead" + (f"; the leader is {leader}" if leader else ""), leader
            )
        return await handler(request)

    async def _proxy(self, request: web.Request, leader: str, body: bytes) -> web.StreamResponse:
        assert self._http is not None, "LeaderRouting.start() was not called"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        headers[FORWARDED_BY_HEADER] = self.role.url
        if request.remote:
            headers["X-Forwarded-For"] = request.remote
        response: web.StreamResponse | None = None
        try:
            async with self._http.request(
                request.method,
                URL(leader + request.raw_path, encoded=True),  # path and query as they came
                headers=headers,
                data=body or None,
                allow_redirects=False,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for name, value in upstream.headers.items():
                    if name.lower() not in _NOT_FORWARDED:
                        response.headers.add(name, value)
                response.headers[LEADER_HEADER] = leader
                if upstream.content_length is not None:
                    response.content_length = upstream.content_length
                await response.prepare(request)
                async with request.app[STREAMS].until_shutdown():
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                await response.write_eof()
                return response
        except _NOT_SENT:
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            if response is None or not response.prepared:
                return _unavailable(
                    f"lost the leader {leader} while forwarding ({exc}): the outcome of this "
                    "request is unknown; read before trying again",
                    None,
                )
            log.info("forwarding a response from %s ended early: %s", leader, exc)
            return response
