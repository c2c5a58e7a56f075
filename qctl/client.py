"""The hub's REST API as qctl sees it: a thin aiohttp client returning plain wire dicts.

Paths follow Kubernetes conventions (`/apis/multiq.dev/v1alpha1[/namespaces/NS]/PLURAL[/NAME]`);
errors come back as Kubernetes Status objects and become one-line QctlErrors here, including
each field error. Streams (watch, logs) are newline-delimited JSON.

Given several hubs (they share one store; one leads, the others forward writes to it), the
client sends each request to the hub that answered last, and moves on to the next hub when
one cannot be reached. A request goes to another hub only if nothing of it reached the
first (the connection could not be made), or if it is a read: a write whose connection broke
after it was sent may have been done, and is reported as such rather than sent twice.

Called by: qctl command modules.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp

from api.meta import API_VERSION, Object
from qctl.config import ResolvedContext
from qctl.errors import QctlError

__all__ = ["HubClient", "HubRequestError", "resource_path"]

_PREFIX = f"/apis/{API_VERSION}"


class HubRequestError(QctlError):
    """The hub answered with an error status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def resource_path(kind: type[Object], namespace: str | None, name: str | None = None) -> str:
    path = _PREFIX
    if kind.NAMESPACED:
        path += f"/namespaces/{namespace or 'default'}"
    path += f"/{kind.plural()}"
    if name:
        path += f"/{name}"
    return path


# Safe to send to another hub even after the connection broke mid-request.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
# With several hubs, how long to try connecting to one before moving on to the next.
FAILOVER_CONNECT_SECONDS = 3.0


class HubClient:
    def __init__(self, context: ResolvedContext, *, timeout: float = 30.0) -> None:
        self._context = context
        self._servers = context.servers
        self._current = 0  # the hub that answered last
        headers = {"Accept": "application/json", "User-Agent": "qctl"}
        if context.token:
            headers["Authorization"] = f"Bearer {context.token}"
        connect = timeout if len(self._servers) == 1 else min(timeout, FAILOVER_CONNECT_SECONDS)
        self._session = aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, connect=connect, sock_read=None),
        )
        self._timeout = timeout

    @property
    def server(self) -> str:
        """The hub requests go to first: the one that answered last."""
        return self._servers[self._current]

    def _hubs(self) -> list[int]:
        """Indexes of the hubs to try, the one that answered last first."""
        count = len(self._servers)
        return [(self._current + i) % count for i in range(count)]

    def _unreachable(self, failures: list[str]) -> QctlError:
        if len(failures) == 1:
            return QctlError(f"cannot reach the hub at {failures[0]}")
        return QctlError("cannot reach any hub:\n  " + "\n  ".join(failures))

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
        try:
            status = json.loads(text)
        except json.JSONDecodeError:
            status = {"message": text.strip() or response.reason, "reason": ""}
        message = str(status.get("message") or response.reason)
        causes = (status.get("details") or {}).get("causes") or []
        if causes:
            message += "".join(f"\n  {c.get('message', c)}" for c in causes)
        raise HubRequestError(response.status, str(status.get("reason", "")), message)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        failures: list[str] = []
        for index in self._hubs():
            server = self._servers[index]
            try:
                async with self._session.request(
                    method,
                    server + path,
                    json=body,
                    params=params,
                    timeout=aiohttp.ClientTimeout(total=self._timeout),
                ) as response:
                    self._current = index
                    await self._raise_for(response)
                    result: dict[str, Any] = await response.json()
                    return result
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                failures.append(f"{server}: {exc}")  # nothing reached it: try the next
            except aiohttp.ClientConnectionError as exc:
                if method not in _READS:
                    raise QctlError(
                        f"lost the hub at {server} during {method} {path}: it may or may not "
                        f"have been done ({exc}); look before trying again"
                    ) from exc
                failures.append(f"{server}: {exc}")
            except TimeoutError as exc:
                raise QctlError(f"the hub at {server} did not answer in time") from exc
        raise self._unreachable(failures)

    async def stream(
        self, path: str, *, params: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each JSON line of a streaming response until the server closes it."""
        failures: list[str] = []
        for index in self._hubs():
            server = self._servers[index]
            try:
                async with self._session.get(server + path, params=params) as response:
                    self._current = index
                    await self._raise_for(response)
                    try:
                        async for raw in response.content:
                            line = raw.strip()
                            if line:
                                yield json.loads(line)
                    except aiohttp.ClientConnectionError as exc:
                        raise QctlError(f"lost the hub at {server}: {exc}") from exc
                    return
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                failures.append(f"{server}: {exc}")
            except aiohttp.ClientConnectionError as exc:
                raise QctlError(f"lost the hub at {server}: {exc}") from exc
        raise self._unreachable(failures)

    # --- verbs ------------------------------------------------------------------------------

    async def get(self, kind: type[Object], name: str, namespace: str | None) -> dict[str, Any]:
        return await self.request("GET", resource_path(kind, namespace, name))

    async def list(
        self,
        kind: type[Object],
        namespace: str | None,
        *,
        all_namespaces: bool = False,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        path = (
            f"{_PREFIX}/{kind.plural()}"
            if all_namespaces or not kind.NAMESPACED
            else (resource_path(kind, namespace))
        )
        params = {"labelSelector": label_selector} if label_selector else None
        body = await self.request("GET", path, params=params)
        items: list[dict[str, Any]] = body.get("items", [])
        return items

    async def watch(
        self, kind: type[Object], namespace: str | None, *, all_namespaces: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        path = (
            f"{_PREFIX}/{kind.plural()}"
            if all_namespaces or not kind.NAMESPACED
            else (resource_path(kind, namespace))
        )
        async for event in self.stream(path, params={"watch": "true"}):
            yield event

    async def create(self, kind: type[Object], body: Mapping[str, Any]) -> dict[str, Any]:
        namespace = (body.get("metadata") or {}).get("namespace")
        return await self.request("POST", resource_path(kind, namespace), body=body)

    async def replace(self, kind: type[Object], body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        path = resource_path(kind, meta.get("namespace"), meta.get("name"))
        return await self.request("PUT", path, body=body)

    async def delete(self, kind: type[Object], name: str, namespace: str | None) -> dict[str, Any]:
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
        path = f"{_PREFIX}/namespaces/{namespace}/submissions"
        return await self.request("POST", path, body=body, params=params)

    def logs(
        self, namespace: str, name: str, params: Mapping[str, str]
    ) -> AsyncIterator[dict[str, Any]]:
        return self.stream(f"{_PREFIX}/namespaces/{namespace}/workloads/{name}/log", params=params)
