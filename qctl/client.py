"""The hub's REST API as qctl's long-lived commands see it: an aiohttp client returning plain
wire dicts, for streams (watch, logs), commands that hold a connection open and `qctl dev`.
One-shot commands (get, describe, delete, submit) use qctl.rest instead, which costs no
aiohttp import; both follow the same rules.

Paths follow Kubernetes conventions (`/apis/multiq.dev/v1alpha1[/namespaces/NS]/PLURAL[/NAME]`);
errors come back as Kubernetes Status objects and become one-line QctlErrors here, including
each field error. Streams (watch, logs) are newline-delimited JSON.

Given several hubs (they share one store; one leads, the others forward writes to it), the
client sends each request to the hub that answered last, and moves on to the next hub when
one cannot be reached. A request goes to another hub only if nothing of it reached the
first (the connection could not be made), or if it is a read: a write whose connection broke
after it was sent may have been done, and is reported as such rather than sent twice.

Called by: qctl command modules (qctl.commands.streams, qctl.commands.dev), benches and e2e.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp

from qctl.config import ResolvedContext
from qctl.errors import HubRequestError, QctlError
from qctl.hubs import (
    PLAIN_HTTP_HINT,
    READS,
    HubRotation,
    tls_context,
    untrusted_certificate,
)
from qctl.kinds import API_PREFIX, KindLike, collection_path, resource_path

__all__ = ["HubClient", "HubRequestError", "json_lines", "resource_path"]


class HubClient:
    def __init__(self, context: ResolvedContext, *, timeout: float = 30.0) -> None:
        self._context = context
        self._hubs = HubRotation(context.servers)
        headers = {"Accept": "application/json", "User-Agent": "qctl"}
        if context.token:
            headers["Authorization"] = f"Bearer {context.token}"
        connect = self._hubs.connect_timeout(timeout)
        tls = (
            tls_context(context.certificate_authority)
            if any(s.startswith("https:") for s in context.servers)
            else None
        )
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls if tls is not None else True),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, connect=connect, sock_read=None),
        )
        self._timeout = timeout

    @property
    def server(self) -> str:
        """The hub requests go to first: the one that answered last."""
        return self._hubs.server

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._session.close()

    # --- plumbing ---------------------------------------------------------------------------

    async def _raise_for(self, response: aiohttp.ClientResponse) -> None:
        if response.status < 400:
            return
        text = await response.text()
        raise HubRequestError.from_reply(response.status, response.reason or "", text)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        failures: list[str] = []
        for index in self._hubs.order():
            server = self._hubs.servers[index]
            try:
                async with self._session.request(
                    method,
                    server + path,
                    json=body,
                    params=params,
                    timeout=aiohttp.ClientTimeout(total=self._timeout),
                ) as response:
                    self._hubs.current = index
                    await self._raise_for(response)
                    result: dict[str, Any] = await response.json()
                    return result
            except aiohttp.ClientConnectorCertificateError as exc:
                raise QctlError(untrusted_certificate(server, _verify_message(exc))) from exc
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                failures.append(f"{server}: {exc}")  # nothing reached it: try the next
            except aiohttp.ClientConnectionError as exc:
                hint = _plain_http_hint(server, exc)
                if method not in READS:
                    raise QctlError(
                        f"lost the hub at {server} during {method} {path}: it may or may not "
                        f"have been done ({exc}{hint}); look before trying again"
                    ) from exc
                failures.append(f"{server}: {exc}{hint}")
            except TimeoutError as exc:
                raise QctlError(f"the hub at {server} did not answer in time") from exc
        raise self._hubs.unreachable(failures)

    async def stream(
        self, path: str, *, params: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each JSON line of a streaming response until the server closes it."""
        failures: list[str] = []
        for index in self._hubs.order():
            server = self._hubs.servers[index]
            try:
                async with self._session.get(server + path, params=params) as response:
                    self._hubs.current = index
                    await self._raise_for(response)
                    try:
                        async for record in json_lines(response.content):
                            yield record
                    except aiohttp.ClientConnectionError as exc:
                        raise QctlError(f"lost the hub at {server}: {exc}") from exc
                    return
            except aiohttp.ClientConnectorCertificateError as exc:
                raise QctlError(untrusted_certificate(server, _verify_message(exc))) from exc
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                failures.append(f"{server}: {exc}")
            except aiohttp.ClientConnectionError as exc:
                hint = _plain_http_hint(server, exc)
                raise QctlError(f"lost the hub at {server}: {exc}{hint}") from exc
        raise self._hubs.unreachable(failures)

    # --- verbs ------------------------------------------------------------------------------

    async def get(self, kind: KindLike, name: str, namespace: str | None) -> dict[str, Any]:
        return await self.request("GET", resource_path(kind, namespace, name))

    async def list(
        self,
        kind: KindLike,
        namespace: str | None,
        *,
        all_namespaces: bool = False,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        path = collection_path(kind, namespace, all_namespaces=all_namespaces)
        params = {"labelSelector": label_selector} if label_selector else None
        body = await self.request("GET", path, params=params)
        items: list[dict[str, Any]] = body.get("items", [])
        return items

    async def watch(
        self, kind: KindLike, namespace: str | None, *, all_namespaces: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        path = collection_path(kind, namespace, all_namespaces=all_namespaces)
        async for event in self.stream(path, params={"watch": "true"}):
            yield event

    async def create(self, kind: KindLike, body: Mapping[str, Any]) -> dict[str, Any]:
        namespace = (body.get("metadata") or {}).get("namespace")
        return await self.request("POST", resource_path(kind, namespace), body=body)

    async def replace(self, kind: KindLike, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        path = resource_path(kind, meta.get("namespace"), meta.get("name"))
        return await self.request("PUT", path, body=body)

    async def delete(self, kind: KindLike, name: str, namespace: str | None) -> dict[str, Any]:
        return await self.request("DELETE", resource_path(kind, namespace, name))

    async def submit(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str,
        cluster_set: str | None = None,
        queue: str | None = None,
    ) -> dict[str, Any]:
        params = {k: v for k, v in (("clusterSet", cluster_set), ("queue", queue)) if v}
        path = f"{API_PREFIX}/namespaces/{namespace}/submissions"
        return await self.request("POST", path, body=body, params=params)

    def logs(
        self, namespace: str, name: str, params: Mapping[str, str]
    ) -> AsyncIterator[dict[str, Any]]:
        return self.stream(
            f"{API_PREFIX}/namespaces/{namespace}/workloads/{name}/log", params=params
        )


async def json_lines(content: aiohttp.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """Each record of a newline-delimited JSON stream, taken a chunk at a time: the whole
    lines that arrived are decoded in one `json.loads` (a read and a decode per line cost a
    follower more than the lines themselves under a log flood); a line split between chunks
    waits for its end."""
    partial = b""
    async for chunk in content.iter_any():
        data = partial + chunk if partial else chunk
        end = data.rfind(b"\n") + 1
        partial = data[end:]
        lines = [line for line in data[:end].split(b"\n") if line.strip()]
        if lines:
            for record in json.loads(b"[" + b",".join(lines) + b"]"):
                yield record
    if partial.strip():
        yield json.loads(partial)


def _plain_http_hint(server: str, exc: aiohttp.ClientConnectionError) -> str:
    plain = server.startswith("http:")
    return PLAIN_HTTP_HINT if plain and isinstance(exc, aiohttp.ServerDisconnectedError) else ""


def _verify_message(exc: aiohttp.ClientConnectorCertificateError) -> str | None:
    cause = exc.certificate_error
    return getattr(cause, "verify_message", None) or str(cause)
