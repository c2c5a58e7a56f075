"""The only kubernetes_asyncio importer: a small typed facade over the calls the agent makes.

Objects travel as plain JSON dicts (`JsonObject`), exactly as the API server sends them: the
agent builds Jobs from the user's wire form and reads only a few status fields, so the
generated models would add cost and no safety. Every call goes through
`_preload_content=False`, so this module sees the raw response and maps a non-2xx status to
the `agent.errors` tree in one place (`errors.k8s_error`); transport errors become
`K8sConnectionError`. Reads and writes are retried on transient errors only
(`agent.retry.k8s_transient`); watches and log streams are not retried here — their callers
(`watching`, `logs`) resume them.

Called by: agent.app (opens it), agent.k8s.watching, agent.inventory, agent.materialize,
agent.status, agent.logs. Tests talk to kubesim through it too.

Creates skip the generated methods and go through the same client's REST layer (`_rest`: its
pool, TLS, proxy and credentials): a sixth less client CPU for a Job's create.

JSON is parsed with pydantic's own parser (`pydantic_core.from_json`, already installed with
pydantic): every watch event and response body passes through here, and it parses a pod
about 40 % faster than the standard library. Request bodies are written by its encoder too
(`_WireJson`): about six times faster than the standard library's for a Job.
"""

from __future__ import annotations

import asyncio
import enum
import json
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import rest as rest_module
from pydantic_core import PydanticSerializationError, from_json, to_json

from agent import retry
from agent.errors import K8sConnectionError, K8sError, k8s_error

__all__ = [
    "JsonObject",
    "Kube",
    "KubeClient",
    "ObjectList",
    "Resource",
    "WatchEvent",
    "open_client",
]

JsonObject = dict[str, Any]


class Resource(enum.StrEnum):
    """The kinds the agent reads or writes."""

    NODES = "nodes"
    PODS = "pods"
    JOBS = "jobs"
    NAMESPACES = "namespaces"
    SERVICES = "services"


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[JsonObject]
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: JsonObject


class Kube(Protocol):
    """What the agent needs from a cluster (kubesim or real, through `KubeClient`)."""

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList: ...

    def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]: ...

    async def get(self, resource: Resource, namespace: str | None, name: str) -> JsonObject: ...

    async def create(
        self, resource: Resource, namespace: str | None, body: JsonObject
    ) -> JsonObject: ...

    async def patch(
        self, resource: Resource, namespace: str, name: str, body: JsonObject
    ) -> JsonObject: ...

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None: ...

    def pod_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = True,
        opened: Callable[[], None] | None = None,
    ) -> AsyncIterator[str]: ...

    async def server_version(self) -> str: ...


_TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
_CONNECT_TIMEOUT = 10.0
_WATCH_GRACE = 30.0


class KubeClient:
    """`Kube` over kubernetes_asyncio's generated APIs (creates: its REST client), raw JSON
    in and out."""

    def __init__(self, api_client: Any) -> None:
        _resolve_proxy_once(api_client)
        _send_wire_json_as_is(api_client)
        _encode_bodies_with_pydantic()
        self._api = api_client
        self._core = k8s.CoreV1Api(api_client)
        self._batch = k8s.BatchV1Api(api_client)

    async def close(self) -> None:
        await self._api.close()

    # plumbing --------------------------------------------------------------------------------

    async def _raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a generated method for its raw aiohttp response; map every failure."""
        try:
            response = await fn(*args, _preload_content=False, **kwargs)
        except K8sError:
            raise
        except _TRANSPORT_ERRORS as exc:
            raise K8sConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status <= 299:
            try:
                body = await response.read()
            except _TRANSPORT_ERRORS:
                body = b""
            finally:
                response.release()
            raise k8s_error(response.status, body, dict(response.headers))
        return response

    async def _json(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async def once() -> Any:
            response = await self._raw(fn, *args, **kwargs)
            try:
                data = await response.read()
            except _TRANSPORT_ERRORS as exc:
                raise K8sConnectionError(f"{type(exc).__name__}: {exc}") from exc
            finally:
                response.release()
            return from_json(data) if data else {}

        return await retry.k8s_call(name, once)

    def _list_fn(
        self, resource: Resource, namespace: str | None
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        match resource:
            case Resource.NODES:
                return self._core.list_node, ()
            case Resource.NAMESPACES:
                return self._core.list_namespace, ()
            case Resource.PODS:
                if namespace is None:
                    return self._core.list_pod_for_all_namespaces, ()
                return self._core.list_namespaced_pod, (namespace,)
            case Resource.JOBS:
                if namespace is None:
                    return self._batch.list_job_for_all_namespaces, ()
                return self._batch.list_namespaced_job, (namespace,)
            case Resource.SERVICES:
                if namespace is None:
                    return self._core.list_service_for_all_namespaces, ()
                return self._core.list_namespaced_service, (namespace,)
        raise AssertionError(resource)

    # reads -----------------------------------------------------------------------------------

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        fn, args = self._list_fn(resource, namespace)
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        body = await self._json(f"list {resource}", fn, *args, **kwargs)
        meta = body.get("metadata") or {}
        return ObjectList(list(body.get("items") or []), str(meta.get("resourceVersion", "")))

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        """One watch request from `resource_version`; ends when the server ends it.

        An ERROR event raises its mapped error (K8sGoneError for 410: the caller relists)."""
        fn, args = self._list_fn(resource, None)
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_seconds,
            # A stream silent for longer than the server's own timeout is dead (a half-open
            # connection): give up on it so the caller resumes or relists.
            "_request_timeout": aiohttp.ClientTimeout(
                sock_connect=_CONNECT_TIMEOUT, sock_read=timeout_seconds + _WATCH_GRACE
            ),
        }
        if label_selector:
            kwargs["label_selector"] = label_selector
        response = await self._raw(fn, *args, **kwargs)
        try:
            while True:
                try:
                    line = await response.content.readline()
                except _TRANSPORT_ERRORS as exc:
                    raise K8sConnectionError(f"watch {resource}: {exc}") from exc
                if not line:
                    return
                if not line.strip():
                    continue
                event = from_json(line)
                kind = str(event.get("type", ""))
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 500)
                    raise k8s_error(code, json.dumps(obj), {})
                yield WatchEvent(kind, obj)
        finally:
            response.release()

    async def get(self, resource: Resource, namespace: str | None, name: str) -> JsonObject:
        match resource:
            case Resource.NODES:
                return dict(await self._json("get node", self._core.read_node, name))
            case Resource.NAMESPACES:
                return dict(await self._json("get namespace", self._core.read_namespace, name))
            case Resource.PODS:
                return dict(
                    await self._json("get pod", self._core.read_namespaced_pod, name, namespace)
                )
            case Resource.JOBS:
                return dict(
                    await self._json("get job", self._batch.read_namespaced_job, name, namespace)
                )
        raise AssertionError(resource)

    async def server_version(self) -> str:
        # VersionApi.get_code asks for `/version/`; `/version` is the path every server serves.
        body = await self._json(
            "version",
            self._api.call_api,
            "/version",
            "GET",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        return str(body.get("gitVersion", ""))

    # writes ----------------------------------------------------------------------------------

    async def create(
        self, resource: Resource, namespace: str | None, body: JsonObject
    ) -> JsonObject:
        """POST `body` to the resource's collection (in `namespace`, for a namespaced one)."""
        path = _collection_path(resource, namespace)
        return dict(await self._json(f"create {resource}", self._rest, "POST", path, body))

    async def _rest(self, method: str, path: str, body: JsonObject, **options: Any) -> Any:
        """One request through kubernetes_asyncio's REST client — its connection pool,
        TLS, proxy, and its credentials (`update_params_for_auth`, which refreshes an
        expiring token as every generated method does) — with wire JSON for a body.

        The agent's hot write, a Job's create, goes this way instead of through the
        generated method: with JSON dicts in and out, what that adds (parameter checks,
        generic sanitising of headers, path and query, the header choices) is all it does,
        and it cost a sixth of a create (~95 of ~550 µs of client CPU against kubesim, 20 at a
        time)."""
        api = self._api
        headers = {
            **api.default_headers,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        if api.cookie:
            headers["Cookie"] = api.cookie
        await api.update_params_for_auth(headers, [], ["BearerToken"])
        url = api.configuration.host + path
        return await api.rest_client.request(method, url, headers=headers, body=body, **options)

    async def patch(
        self, resource: Resource, namespace: str, name: str, body: JsonObject
    ) -> JsonObject:
        """A JSON merge patch (RFC 7386: null removes a field) of a Job or a pod."""
        match resource:
            case Resource.JOBS:
                return dict(
                    await self._json(
                        "patch job",
                        self._batch.patch_namespaced_job,
                        name,
                        namespace,
                        body,
                        _content_type="application/merge-patch+json",
                    )
                )
            case Resource.PODS:
                return dict(
                    await self._json(
                        "patch pod",
                        self._core.patch_namespaced_pod,
                        name,
                        namespace,
                        body,
                        _content_type="application/merge-patch+json",
                    )
                )
        raise AssertionError(resource)

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        """Delete with background propagation (a Job's pods go too); `uid` is a precondition."""
        body: JsonObject = {"propagationPolicy": "Background"}
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        match resource:
            case Resource.JOBS:
                await self._json(
                    "delete job", self._batch.delete_namespaced_job, name, namespace, body=body
                )
            case Resource.PODS:
                await self._json(
                    "delete pod", self._core.delete_namespaced_pod, name, namespace, body=body
                )
            case Resource.NAMESPACES:
                await self._json("delete namespace", self._core.delete_namespace, name, body=body)
            case Resource.SERVICES:
                await self._json(
                    "delete service",
                    self._core.delete_namespaced_service,
                    name,
                    namespace,
                    body=body,
                )
            case _:
                raise AssertionError(resource)

    # logs ------------------------------------------------------------------------------------

    async def pod_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = True,
        opened: Callable[[], None] | None = None,
    ) -> AsyncIterator[str]:
        """The pod's log lines (without the newline); with `follow`, until the container ends.
        `opened` is called once the API server answered: the read holds the log from then on
        (a silent container's read has no first line to tell)."""
        kwargs: dict[str, Any] = {"follow": follow, "timestamps": timestamps}
        if container is not None:
            kwargs["container"] = container
        if since_seconds is not None:
            kwargs["since_seconds"] = since_seconds
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        response = await self._raw(self._core.read_namespaced_pod_log, name, namespace, **kwargs)
        if opened is not None:
            opened()
        # Whatever arrived, split into lines: a readline per line cost the agent more than
        # anything else it does with a line.
        pending = bytearray()  # (a long line arriving in many chunks stays linear)
        try:
            while True:
                try:
                    chunk = await response.content.readany()
                except _TRANSPORT_ERRORS as exc:
                    raise K8sConnectionError(f"log {namespace}/{name}: {exc}") from exc
                if not chunk:
                    if pending:
                        yield pending.decode("utf-8", "replace")
                    return
                pending += chunk
                end = pending.rfind(b"\n")
                if end < 0:
                    continue
                complete = bytes(pending[:end]).split(b"\n")
                del pending[: end + 1]
                for line in complete:
                    yield line.decode("utf-8", "replace")
        finally:
            response.release()


def _collection_path(resource: Resource, namespace: str | None) -> str:
    """The API path of a resource's collection, in `namespace` for a namespaced one."""
    if resource is Resource.NAMESPACES or resource is Resource.NODES:
        return f"/api/v1/{resource}"
    if namespace is None:
        raise ValueError(f"{resource} are namespaced: no namespace given")
    group = "/apis/batch/v1" if resource is Resource.JOBS else "/api/v1"
    return f"{group}/namespaces/{urllib.parse.quote(namespace, safe='')}/{resource}"


def _send_wire_json_as_is(api_client: Any) -> None:
    """This facade passes only wire JSON (plain dicts of strings, numbers, booleans and
    lists) where the generated client converts its model objects: a dict goes out as it is.
    The conversion is a recursive copy of every body, 8 % of the agent's time while it
    creates hundreds of Jobs a second. Anything else (lists of query parameters) takes the
    generated client's own path."""
    convert = api_client.sanitize_for_serialization

    def sanitize(obj: Any) -> Any:
        return obj if type(obj) is dict else convert(obj)

    api_client.sanitize_for_serialization = sanitize


class _WireJson:
    """What kubernetes_asyncio's REST client calls `json`: it encodes every request body with
    `json.dumps(body)`, and this `dumps` does it with pydantic's encoder: compact UTF-8 JSON,
    the same values, in a sixth of the time for a Job. Anything it cannot encode, and any
    call with options, goes to the standard library, so errors stay the standard ones."""

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)

    @staticmethod
    def dumps(obj: Any, **options: Any) -> str:
        if not options:
            try:
                return to_json(obj).decode()
            except PydanticSerializationError:
                pass
        return json.dumps(obj, **options)


def _encode_bodies_with_pydantic() -> None:
    """Give kubernetes_asyncio's REST module `_WireJson` for `json` (once per process)."""
    # (The module imports json without exporting it, hence the ignores.)
    if rest_module.json is json:  # type: ignore[attr-defined]
        rest_module.json = _WireJson()  # type: ignore[attr-defined]


def _resolve_proxy_once(api_client: Any) -> None:
    """kubernetes_asyncio's session trusts the environment, so aiohttp re-reads the proxy
    variables and ~/.netrc on every request — a quarter of the agent's CPU under load. Decide
    the proxy once, as the environment says now (HTTPS_PROXY/HTTP_PROXY, NO_PROXY), and give
    the connection pool a session that no longer looks."""
    rest = getattr(api_client, "rest_client", None)
    old = getattr(rest, "pool_manager", None)
    if rest is None or not isinstance(old, aiohttp.ClientSession) or not old.trust_env:
        return
    if not rest.proxy:
        host = urllib.parse.urlsplit(api_client.configuration.host).hostname or ""
        proxies = urllib.request.getproxies_environment()
        scheme = urllib.parse.urlsplit(api_client.configuration.host).scheme or "https"
        if scheme in proxies and not urllib.request.proxy_bypass(host):
            rest.proxy = proxies[scheme]
    connector = old.connector
    old.detach()  # the pool keeps its connections; only the session around it changes
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )


async def _api_client(kubeconfig: Path | None, context: str | None) -> Any:
    if kubeconfig is not None:
        return await k8s_config.new_client_from_config(config_file=str(kubeconfig), context=context)
    try:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return k8s.ApiClient(configuration)
    except k8s_config.ConfigException:
        return await k8s_config.new_client_from_config(context=context)


@asynccontextmanager
async def open_client(
    kubeconfig: Path | None = None, context: str | None = None
) -> AsyncIterator[KubeClient]:
    """A connected `KubeClient`, closed on exit."""
    kube = KubeClient(await _api_client(kubeconfig, context))
    try:
        yield kube
    finally:
        await kube.close()


def labels_selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
