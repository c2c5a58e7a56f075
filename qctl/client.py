"""The hub's REST API as qctl sees it: a thin aiohttp client returning plain wire dicts.

Paths follow Kubernetes conventions (`/apis/multiq.dev/v1alpha1[/namespaces/NS]/PLURAL[/NAME]`);
errors come back as Kubernetes Status objects and become one-line QctlErrors here, including
each field error. Streams (watch, logs) are newline-delimited JSON.

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


class HubClient:
    def __init__(self, context: ResolvedContext, *, timeout: float = 30.0) -> None:
        self._context = context
        headers = {"Accept": "application/json", "User-Agent": "qctl"}
        if context.token:
            headers["Authorization"] = f"Bearer {context.token}"
        self._session = aiohttp.ClientSession(
            base_url=context.server,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=None),
        )
        self._timeout = timeout

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
        try:
            async with self._session.request(
                method,
                path,
                json=body,
                params=params,
                timeout=aiohttp.ClientTimeout(total=self._timeout),
            ) as response:
                await self._raise_for(response)
                result: dict[str, Any] = await response.json()
                return result
        except aiohttp.ClientConnectionError as exc:
            raise QctlError(f"cannot reach the hub at {self._context.server}: {exc}") from exc
        except TimeoutError as exc:
            raise QctlError(f"the hub at {self._context.server} did not answer in time") from exc

    async def stream(
        self, path: str, *, params: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each JSON line of a streaming response until the server closes it."""
        try:
            async with self._session.get(path, params=params) as response:
                await self._raise_for(response)
                async for raw in response.content:
                    line = raw.strip()
                    if line:
                        yield json.loads(line)
        except aiohttp.ClientConnectionError as exc:
            raise QctlError(f"lost the hub at {self._context.server}: {exc}") from exc

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
