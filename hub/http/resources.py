"""REST resources for every MultiQ kind the hub serves, Kubernetes style:

    GET    /apis/multiq.dev/v1alpha1/{plural}                      list (all namespaces)
    GET    /apis/multiq.dev/v1alpha1[/namespaces/{ns}]/{plural}    list; ?watch=true streams
    POST   /apis/multiq.dev/v1alpha1[/namespaces/{ns}]/{plural}    create
    GET    …/{plural}/{name}                                       get
    PUT    …/{plural}/{name}                                       replace (CAS on resourceVersion)
    PUT    …/{plural}/{name}/status                                replace the status only
    DELETE …/{plural}/{name}                                       delete (?resourceVersion=)

`?dryRun=All` on a create or a replace (Kubernetes' parameter; `qctl create … --dry-run=server`)
does every check the write would do — access, validation, the name taken or the object there,
its resourceVersion current — and answers with what would be stored, storing nothing.

`[/namespaces/{ns}]` is there for namespaced kinds and absent for cluster-scoped ones, as in
Kubernetes; only a list may leave a namespaced kind's namespace out. A namespace or name in
the URL that no object can have is a 400 naming it, a resourceVersion that is not one this
hub gave out a 400. A watch with `?timeoutSeconds=S` ends cleanly after S seconds, as
Kubernetes' does (`kubectl wait` asks for one); 0 or none: it lasts until the client hangs up
or the hub stops.

Status, as Kubernetes' status subresource: a `status` written on create is ignored, a replace
keeps the stored status whatever its body says, and `…/status` changes the status alone (its
spec and metadata are kept). The hub's own components write status through the store, not
over HTTP; over HTTP only admins may (kinds without a status have no such route).

Who may do what is data (`ACCESS`) and hub.auth: configuration kinds are readable by every
user and writable by admins; namespaced kinds are readable in the caller's tenants'
namespaces (everywhere by admins and viewers, `multiq:viewers`); agents reach none of it.
Workloads are created through submissions (hub.http.submit), not here, and deleted by the
users of their namespace's tenants; those users may also replace one to flip `spec.active`
alone (stop or resume it, `qctl stop|resume workload`), any other change to it is an admin's.
A forbidden request is a 403 whether or not the object exists, as in Kubernetes (which answers
403, not 404, to a namespaced read it forbids).

Called by: hub.app (routes). Uses hub.objects for storage semantics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.meta import API_VERSION, Object
from api.v1alpha1.federation import Tenant
from hub.auth import Principal, namespaces_of, require_admin, require_namespace
from hub.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
)
from hub.http.middleware import PRINCIPAL, int_param, json_reply, read_body
from hub.http.streams import STREAMS
from hub.objects import (
    ObjectRepository,
    check_path_names,
    parse_resource_version,
    without_status,
)
from hub.store.base import encode_json

__all__ = ["ACCESS", "Access", "ResourceRoutes", "label_selector_matches", "parse_label_selector"]

PREFIX = f"/apis/{API_VERSION}"


@dataclass(frozen=True, slots=True)
class Access:
    """Who may write a kind through the generic REST routes."""

    writable_by_admins: bool = True
    # Workloads are created by submission and changed by the hub; users may only delete.
    create_via_rest: bool = True


ACCESS: Mapping[str, Access] = {
    "Workload": Access(writable_by_admins=True, create_via_rest=False),
}
DEFAULT_ACCESS = Access()


def parse_label_selector(text: str) -> list[tuple[str, str, str | None]]:
    """`a=b,c!=d,e,!f` → [(key, op, value)] with ops =, !=, exists, !exists."""
    terms: list[tuple[str, str, str | None]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in raw:
            key, value = raw.split("=", 1)
            terms.append((key.strip().rstrip("="), "=", value.strip().lstrip("=")))
        elif raw.startswith("!"):
            terms.append((raw[1:].strip(), "!exists", None))
        else:
            terms.append((raw, "exists", None))
    for key, _, _ in terms:
        if not key:
            raise BadRequestError(f"invalid label selector {text!r}")
    return terms


def label_selector_matches(
    terms: list[tuple[str, str, str | None]], labels: Mapping[str, str]
) -> bool:
    for key, op, value in terms:
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!exists" and key in labels:
            return False
    return True


class ResourceRoutes:
    """The generic handlers, bound to a repository and the kinds served."""

    def __init__(self, repo: ObjectRepository, kinds: list[type[Object]]) -> None:
        self.repo = repo
        self.by_plural = {k.plural(): k for k in kinds}

    def add_to(self, app: web.Application) -> None:
        r = app.router
        r.add_get(PREFIX + "/namespaces/{ns}/{plural}", self.list_or_watch)
        r.add_post(PREFIX + "/namespaces/{ns}/{plural}", self.create)
        r.add_get(PREFIX + "/namespaces/{ns}/{plural}/{name}", self.get)
        r.add_put(PREFIX + "/namespaces/{ns}/{plural}/{name}", self.replace)
        r.add_put(PREFIX + "/namespaces/{ns}/{plural}/{name}/status", self.replace_status)
        r.add_delete(PREFIX + "/namespaces/{ns}/{plural}/{name}", self.delete)
        r.add_get(PREFIX + "/{plural}", self.list_or_watch)
        r.add_post(PREFIX + "/{plural}", self.create)
        r.add_get(PREFIX + "/{plural}/{name}", self.get)
        r.add_put(PREFIX + "/{plural}/{name}", self.replace)
        r.add_put(PREFIX + "/{plural}/{name}/status", self.replace_status)
        r.add_delete(PREFIX + "/{plural}/{name}", self.delete)

    # --- helpers ----------------------------------------------------------------------------

    def _kind(self, request: web.Request) -> type[Object]:
        plural = request.match_info["plural"]
        kind = self.by_plural.get(plural)
        if kind is None:
            raise web.HTTPNotFound()
        ns = request.match_info.get("ns")
        name = request.match_info.get("name")
        if ns is not None and not kind.NAMESPACED:
            raise BadRequestError(f"{plural} are cluster-scoped: drop /namespaces/{ns}")
        if ns is None and kind.NAMESPACED and (name is not None or request.method != "GET"):
            raise NotFoundError(
                f"{plural} are namespaced: use {PREFIX}/namespaces/NAMESPACE/{plural}"
                + (f"/{name}" if name is not None else "")
            )
        check_path_names(kind, name, ns)
        return kind

    async def _tenants(self) -> list[Tenant]:
        return await self.repo.list(Tenant)

    async def _check_read(self, principal: Principal, kind: type[Object], ns: str | None) -> None:
        if principal.kind == "agent":
            raise ForbiddenError(f"agent {principal.name} may only use the agent endpoints")
        if kind.NAMESPACED and ns is not None:
            require_namespace(principal, ns, await self._tenants(), f"read {kind.plural()}")

    # --- handlers ---------------------------------------------------------------------------

    async def list_or_watch(self, request: web.Request) -> web.StreamResponse:
        kind = self._kind(request)
        ns = request.match_info.get("ns")
        principal: Principal = request[PRINCIPAL]
        await self._check_read(principal, kind, ns)
        allowed = None
        if kind.NAMESPACED and ns is None:
            allowed = namespaces_of(principal, await self._tenants())
        terms = parse_label_selector(request.query.get("labelSelector", ""))

        def visible(obj: Mapping[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            if allowed is not None and meta.get("namespace") not in allowed:
                return False
            return label_selector_matches(terms, meta.get("labels") or {})

        lasting = int_param(request.query, "timeoutSeconds") or None  # 0: none
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request, kind, ns, visible, lasting)
        items, revision = await self.repo.list_wire(kind, ns)
        return json_reply(
            {
                "apiVersion": API_VERSION,
                "kind": f"{kind.KIND}List",
                "metadata": {"resourceVersion": str(revision)},
                "items": [i for i in items if visible(i)],
            }
        )

    async def _watch(
        self,
        request: web.Request,
        kind: type[Object],
        ns: str | None,
        visible: Any,
        lasting: int | None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        since = parse_resource_version(request.query.get("resourceVersion"), "resourceVersion")
        items: list[dict[str, Any]] = []
        if not since:  # none, or "0": from now, the current objects first
            items, since = await self.repo.list_wire(kind, ns)
        await response.prepare(request)
        out = WatchWriter(response)
        try:
            async with request.app[STREAMS].until_shutdown(lasting):
                for item in items:
                    if visible(item):
                        await out.send("ADDED", item)
                async for event_type, obj, text in self.repo.watch_wire(kind, ns, since=since):
                    if visible(obj):
                        await out.send(event_type, obj, text)
        except ConnectionResetError:
            # The watcher hung up (a client that stops reading, a browser leaving the page):
            # the watch simply ends; there is no one left to answer.
            pass
        finally:
            await out.close()
        return response

    async def get(self, request: web.Request) -> web.Response:
        kind = self._kind(request)
        ns = request.match_info.get("ns")
        await self._check_read(request[PRINCIPAL], kind, ns)
        return json_reply(await self.repo.get_wire(kind, request.match_info["name"], ns))

    def _check_write(self, principal: Principal, kind: type[Object], verb: str) -> None:
        require_admin(principal, f"{verb} {kind.plural()}")

    def _decode_for(self, request: web.Request, kind: type[Object], body: dict[str, Any]) -> Object:
        ns = request.match_info.get("ns")
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise BadRequestError("metadata must be an object")
        if kind.NAMESPACED:
            if meta.get("namespace") not in (None, ns):
                raise BadRequestError(
                    f"the namespace of the object ({meta.get('namespace')}) does not match the "
                    f"namespace of the request ({ns})"
                )
            meta["namespace"] = ns
        body.setdefault("apiVersion", kind.API_VERSION)
        body.setdefault("kind", kind.KIND)
        if body.get("kind") != kind.KIND:
            raise BadRequestError(f"the body is a {body.get('kind')}, the URL is {kind.plural()}")
        return self.repo.validate(body)

    async def create(self, request: web.Request) -> web.Response:
        kind = self._kind(request)
        access = ACCESS.get(kind.KIND, DEFAULT_ACCESS)
        if not access.create_via_rest:
            raise BadRequestError(
                f"{kind.plural()} are created by submission: POST "
                f"{PREFIX}/namespaces/NS/submissions (qctl submit)"
            )
        self._check_write(request[PRINCIPAL], kind, "create")
        obj = self._decode_for(request, kind, await read_body(request))
        if _dry_run(request):
            name, ns = obj.metadata.name, obj.metadata.namespace
            try:
                await self.repo.get_wire(kind, name, ns)
            except NotFoundError:
                return json_reply(without_status(obj).to_wire(), status=201)
            raise AlreadyExistsError(f'{kind.plural()} "{name}" already exists')
        return json_reply(await self.repo.create(without_status(obj)), status=201)

    async def _replacement(self, request: web.Request, kind: type[Object]) -> Object:
        obj = self._decode_for(request, kind, await read_body(request))
        if obj.metadata.name != request.match_info["name"]:
            raise BadRequestError(
                f"the name of the object ({obj.metadata.name}) does not match the name in the "
                f"URL ({request.match_info['name']})"
            )
        return obj

    async def replace(self, request: web.Request) -> web.Response:
        kind = self._kind(request)
        principal: Principal = request[PRINCIPAL]
        ns = request.match_info.get("ns")
        if kind.KIND == "Workload" and ns is not None and not principal.is_admin:
            tenants = await self._tenants()
            require_namespace(principal, ns, tenants, "stop or resume workloads", write=True)
            obj = await self._replacement(request, kind)
            stored = await self.repo.get_wire(kind, obj.metadata.name, ns)
            _require_only_active_changed(principal, kind, stored, obj)
            # Compared with this revision: a change in between is a conflict, not overwritten.
            obj.metadata.resource_version = (
                obj.metadata.resource_version or stored["metadata"]["resourceVersion"]
            )
        else:
            self._check_write(principal, kind, "update")
            obj = await self._replacement(request, kind)
        if _dry_run(request):
            ns = request.match_info.get("ns")
            stored = await self.repo.get_wire(kind, obj.metadata.name, ns)
            expected = obj.metadata.resource_version
            if expected is not None and expected != stored["metadata"].get("resourceVersion"):
                raise ConflictError(
                    f'{kind.plural()} "{obj.metadata.name}": the object has been modified'
                )
            answer = obj.to_wire()
            if "status" in stored:
                answer["status"] = stored["status"]
            return json_reply(answer)
        return json_reply(await self.repo.replace(obj, keep_status=True))

    async def replace_status(self, request: web.Request) -> web.Response:
        kind = self._kind(request)
        if "status" not in kind.model_fields:
            raise NotFoundError(f"{kind.plural()} have no status")
        self._check_write(request[PRINCIPAL], kind, "update the status of")
        obj = await self._replacement(request, kind)
        return json_reply(await self.repo.replace_status(obj))

    async def delete(self, request: web.Request) -> web.Response:
        kind = self._kind(request)
        ns = request.match_info.get("ns")
        principal: Principal = request[PRINCIPAL]
        if kind.KIND == "Workload" and ns is not None and not principal.is_admin:
            tenants = await self._tenants()
            require_namespace(principal, ns, tenants, "delete workloads", write=True)
        else:
            self._check_write(principal, kind, "delete")
        deleted = await self.repo.delete(
            kind, request.match_info["name"], ns, expected=request.query.get("resourceVersion")
        )
        return json_reply(deleted)


def _require_only_active_changed(
    principal: Principal, kind: type[Object], stored: Mapping[str, Any], new: Object
) -> None:
    """A namespace's users may stop and resume its workloads (`spec.active`), nothing more:
    the spec, labels and annotations they send must otherwise be what is stored."""

    def rest(wire: Mapping[str, Any]) -> tuple[Any, ...]:
        spec = {k: v for k, v in (wire.get("spec") or {}).items() if k != "active"}
        meta = wire.get("metadata") or {}
        return spec, meta.get("labels") or {}, meta.get("annotations") or {}

    if rest(kind.model_validate(dict(stored)).to_wire()) != rest(new.to_wire()):
        raise ForbiddenError(
            f"{principal.name} may only change spec.active of a workload (stop or resume "
            "it); any other change to it is an admin's"
        )


def _dry_run(request: web.Request) -> bool:
    value = request.query.get("dryRun")
    if value not in (None, "All"):
        raise BadRequestError(f"dryRun: must be All, not {value!r}")
    return value == "All"


class WatchWriter:
    """Writes a watch's events to its response, every event that is ready in one write.

    The store publishes a commit's events together (SQLite commits writes in groups), and a
    watch takes them one after another without waiting; a write per event cost the hub a
    system call and an HTTP chunk each — under a burst of submissions, more than encoding
    the event. So `send` only queues the event's line, and a writer task writes what is
    queued once the watch waits for more. `send` waits for the writer only when more than
    `MAX_QUEUED_BYTES` are queued: a reader that does not keep up holds the watch back, as
    it did when every event was written in turn."""

    MAX_QUEUED_BYTES = 1 << 20

    def __init__(self, response: web.StreamResponse) -> None:
        self._response = response
        self._lines: list[bytes] = []
        self._queued = 0
        self._ready = asyncio.Event()
        self._drained = asyncio.Event()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def send(self, event_type: str, obj: Mapping[str, Any], text: str | None = None) -> None:
        """Queue one event: `obj`, or its JSON `text` when the store gave it. Raises the
        writer's error (ConnectionResetError: the watcher hung up) once it has failed."""
        if self._writer.done():
            self._writer.result()  # (raises what ended it)
            raise ConnectionResetError("the watch writer stopped")
        if text is None:
            # The object is a stored value: its spec's JSON is shared with the store's writes.
            text = encode_json(dict(obj))
        line = f'{{"type":"{event_type}","object":{text}}}\n'.encode()
        self._lines.append(line)
        self._queued += len(line)
        self._ready.set()
        if self._queued > self.MAX_QUEUED_BYTES:
            await self._drain()

    async def _drain(self) -> None:
        """Wait until the writer wrote everything queued (the write under way too), or
        stopped."""
        self._drained.clear()
        self._ready.set()
        await self._drained.wait()

    async def _write_loop(self) -> None:
        try:
            while True:
                await self._ready.wait()
                self._ready.clear()
                while self._lines:
                    chunk = b"".join(self._lines)
                    self._lines.clear()
                    self._queued = 0
                    await self._response.write(chunk)
                self._drained.set()
        finally:
            self._drained.set()  # (a sender waiting must not wait for a writer gone)

    async def close(self) -> None:
        """Write what is still queued (if the watcher is still there), then stop."""
        if not self._writer.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._drain()
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionResetError, RuntimeError):
            await self._writer
