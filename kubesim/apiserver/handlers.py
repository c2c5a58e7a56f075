"""REST verbs for every served resource: path parsing, list/watch, get, create, update,
patch, delete, deletecollection, and the status and finalize subresources (the pod log,
binding and eviction subresources are in `kubesim.apiserver.pods`).

One catch-all aiohttp handler (`handle_api`) parses `/api/...` and `/apis/...` paths
(including the legacy `/watch/` prefix), answers discovery for the short ones, and dispatches
verbs for the rest to `ObjectRegistry`. Content negotiation (`as=Table`) and query-string
quirks (Go-style booleans: only absent, "0" or "false" mean false) live here too. Wired into
the application by `kubesim.apiserver.app`.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from kubesim.apiserver import discovery, pods, reviews, scale
from kubesim.apiserver.context import (
    API_CONTEXT,
    ApiContext,
    Target,
    go_bool,
    json_response,
    warning_header,
)
from kubesim.apiserver.patch import apply_patch
from kubesim.apiserver.registry import DeleteOptions
from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector
from kubesim.apiserver.tables import render_table
from kubesim.apiserver.validation import FieldValidation, check_fields, decode_body
from kubesim.apiserver.watch import WatchRequest, WatchStream
from kubesim.errors import (
    BadRequestError,
    Cause,
    ConflictError,
    ExpiredError,
    MethodNotAllowedError,
    NotAcceptableError,
    NotFoundError,
    ServerTimeoutError,
)
from kubesim.objects import JsonObject, labels_of
from kubesim.resources import ResourceRegistry

__all__ = ["handle_api"]

_COMPACTED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter."
)


def _parse_target(types: ResourceRegistry, group: str, version: str, rest: list[str]) -> Target:
    watch_prefix = bool(rest) and rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace = rest[1]
        rest = rest[2:]
    if not rest or len(rest) > 3:
        raise NotFoundError("the server could not find the requested resource")
    resource = types.lookup(group, version, rest[0])
    if resource is None:
        raise NotFoundError("the server could not find the requested resource")
    if namespace is not None and not resource.namespaced:
        raise NotFoundError("the server could not find the requested resource")
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    if subresource is not None and subresource not in resource.subresources:
        raise NotFoundError("the server could not find the requested resource")
    return Target(resource, namespace, name, subresource, watch_prefix)


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept and "meta.k8s.io" in accept


def _check_acceptable(request: web.Request) -> None:
    """406 unless the client accepts plain JSON (or YAML) or a Table."""
    accept = request.headers.get("Accept", "")
    if not accept:
        return
    for part in accept.split(","):
        media, _, params = part.strip().partition(";")
        plain = media.strip() in ("application/json", "*/*", "application/*", "application/yaml")
        if plain and ("as=" not in params or "as=Table" in params):
            return
    raise NotAcceptableError(
        "only the following media types are accepted: application/json, application/yaml, "
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    )


async def handle_api(request: web.Request) -> web.StreamResponse:
    """Entry point for every path under /api and /apis."""
    ctx = request.app[API_CONTEXT]
    parts = [p for p in request.path.split("/") if p]
    if len(parts) == 1 and discovery.AGGREGATED_MEDIA_TYPE in request.headers.get("Accept", ""):
        # kubectl 1.32 asks for aggregated discovery first: one round trip per prefix.
        response = json_response(discovery.aggregated(ctx.types, core=parts[0] == "api"))
        response.headers["Content-Type"] = discovery.AGGREGATED_CONTENT_TYPE
        return response
    if parts[0] == "api":
        if len(parts) == 1:
            return json_response(discovery.api_versions(ctx.server_address))
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) == 1:
            return json_response(discovery.api_group_list(ctx.types))
        if len(parts) == 2:
            return _group_document(ctx, parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        resources = discovery.api_resource_list(ctx.types, group, version)
        if resources is None:
            raise NotFoundError("the server could not find the requested resource")
        return json_response(resources)
    target = _parse_target(ctx.types, group, version, rest)
    return await _dispatch(ctx, request, target)


def _group_document(ctx: ApiContext, group: str) -> web.Response:
    versions = ctx.types.group_versions().get(group)
    if not versions:
        raise NotFoundError("the server could not find the requested resource")
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return json_response(
        {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }
    )


async def _dispatch(ctx: ApiContext, request: web.Request, target: Target) -> web.StreamResponse:
    method = request.method
    query = request.query
    if target.resource.key in reviews.REVIEW_RESOURCES:
        if method != "POST" or target.name is not None:
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await reviews.create_review(ctx, request, target)
    if target.name is None:
        if method == "GET":
            if target.watch_prefix or go_bool(query.get("watch")):
                return await _watch(ctx, request, target)
            return _list(ctx, request, target)
        if method == "POST":
            return await _create(ctx, request, target)
        if method == "DELETE":
            return await _delete_collection(ctx, request, target)
        raise MethodNotAllowedError(
            "the server does not allow this method on the requested resource"
        )
    if target.watch_prefix:
        if method != "GET":
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await _watch(ctx, request, target)
    if target.subresource == "log":
        if method != "GET":
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await pods.logs(ctx, request, target)
    if target.subresource == "eviction":
        if method != "POST":
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await pods.evict(ctx, request, target)
    if target.subresource == "scale":
        return await scale.handle_scale(ctx, request, target)
    if target.subresource == "token":
        if method != "POST":
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await reviews.create_token(ctx, request, target)
    if target.subresource == "binding":
        if method != "POST":
            raise MethodNotAllowedError(
                "the server does not allow this method on the requested resource"
            )
        return await pods.bind(ctx, request, target)
    if method == "GET":
        return _get(ctx, request, target)
    if method == "PUT":
        return await _update(ctx, request, target)
    if method == "PATCH":
        return await _patch(ctx, request, target)
    if method == "DELETE" and target.subresource is None:
        return await _delete(ctx, request, target)
    raise MethodNotAllowedError("the server does not allow this method on the requested resource")


# -- reads ------------------------------------------------------------------------------------


def _object_namespace(target: Target) -> str:
    return (target.namespace or "") if target.resource.namespaced else ""


def _get(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    _check_acceptable(request)
    assert target.name is not None
    obj = ctx.registry.get(target.resource, _object_namespace(target), target.name)
    if _wants_table(request):
        return json_response(
            render_table(
                target.resource,
                [obj],
                resource_version=obj["metadata"]["resourceVersion"],
                include_object=request.query.get("includeObject", "Metadata"),
            )
        )
    return json_response(obj)


ObjectKey = tuple[str, str]  # (namespace, name): the order lists are served in


def _encode_continue(revision: int, last_key: ObjectKey) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": list(last_key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, ObjectKey]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = data["start"]
        return int(data["rv"]), (str(namespace), str(name))
    except (ValueError, KeyError, TypeError, binascii.Error) as error:
        raise BadRequestError(f"continue key is not valid: {error}") from error


def _key(obj: JsonObject) -> ObjectKey:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _check_not_in_future(ctx: ApiContext, requested: str | None) -> None:
    """A resourceVersion ahead of the store: the watch cache's 504 "Too large" answer."""
    if not requested:
        return
    try:
        wanted = int(requested)
    except ValueError as error:
        raise BadRequestError(f"invalid resource version: {requested!r}") from error
    if wanted > ctx.store.revision:
        raise ServerTimeoutError(
            f"Too large resource version: {wanted}, current: {ctx.store.revision}",
            causes=(
                Cause(
                    "",
                    "ResourceVersionTooLarge",
                    f"Too large resource version: {wanted}, current: {ctx.store.revision}",
                ),
            ),
            retry_after_seconds=1,
        )


def _list(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    _check_acceptable(request)
    query = request.query
    resource = target.resource
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), resource)
    bucket = ctx.store.bucket(resource)
    requested_rv = query.get("resourceVersion")
    if requested_rv != "0":
        _check_not_in_future(ctx, requested_rv)
    exact = query.get("resourceVersionMatch") == "Exact" and requested_rv
    if exact and int(requested_rv or 0) < bucket.compacted_rv:
        raise ExpiredError("The resourceVersion for the provided list is too old.")
    namespace = target.namespace if resource.namespaced else None
    name = fields.exact_name()
    if name is not None:
        single = (
            ctx.store.get(resource, namespace or "", name)
            if namespace or not resource.namespaced
            else None
        )
        candidates = (
            [single]
            if single is not None
            else ([] if namespace or not resource.namespaced else ctx.store.list(resource, None))
        )
    else:
        candidates = ctx.store.list(resource, namespace)
    revision = ctx.store.revision
    start_after: ObjectKey | None = None
    if query.get("continue"):
        token_rv, start_after = _decode_continue(query["continue"])
        if token_rv < bucket.compacted_rv:
            raise ExpiredError(_COMPACTED_CONTINUE)
        revision = token_rv
    items = [
        obj
        for obj in candidates
        if (start_after is None or _key(obj) > start_after)
        and (labels.empty or labels.matches(labels_of(obj)))
        and (fields.empty or fields.matches(obj))
    ]
    continue_token: str | None = None
    remaining: int | None = None
    limit = int(query.get("limit") or 0)
    if limit > 0 and len(items) > limit:
        remaining = len(items) - limit
        items = items[:limit]
        continue_token = _encode_continue(revision, _key(items[-1]))
    if _wants_table(request):
        return json_response(
            render_table(
                resource,
                items,
                resource_version=str(revision),
                continue_token=continue_token,
                remaining=remaining,
                include_object=query.get("includeObject", "Metadata"),
            )
        )
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if continue_token:
        metadata["continue"] = continue_token
        metadata["remainingItemCount"] = remaining
    return json_response(
        {
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": items,
        }
    )


async def _watch(ctx: ApiContext, request: web.Request, target: Target) -> web.StreamResponse:
    query = request.query
    resource = target.resource
    fields_text = query.get("fieldSelector")
    if target.name is not None:
        fields_text = f"metadata.name={target.name}" + (f",{fields_text}" if fields_text else "")
    _check_not_in_future(ctx, query.get("resourceVersion"))
    timeout = query.get("timeoutSeconds")
    # Without timeoutSeconds the apiserver still ends a watch after minRequestTimeout x [1, 2).
    timeout_seconds = float(timeout) if timeout else ctx.watch_max_seconds * (1 + random.random())
    watch_request = WatchRequest(
        resource=resource,
        namespace=target.namespace if resource.namespaced else None,
        labels=parse_label_selector(query.get("labelSelector")),
        fields=parse_field_selector(fields_text, resource),
        resource_version=query.get("resourceVersion"),
        bookmarks=go_bool(query.get("allowWatchBookmarks")),
        timeout_seconds=timeout_seconds,
        send_initial_events=go_bool(query.get("sendInitialEvents")),
        as_table=_wants_table(request),
        include_object=query.get("includeObject", "Metadata"),
    )
    stream = WatchStream(watch_request, ctx.store, ctx.bookmark_interval)
    stream.start()
    forget = ctx.watches.add(stream)
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        await stream.serve(response)
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        stream.close()
        forget()
    return response


# -- writes -----------------------------------------------------------------------------------


def _field_validation(query: Mapping[str, str]) -> str:
    mode = query.get("fieldValidation") or FieldValidation.WARN
    if mode not in (FieldValidation.STRICT, FieldValidation.WARN, FieldValidation.IGNORE):
        raise BadRequestError(
            f"fieldValidation parameter unsupported: {mode}; supported values: Ignore, Warn, Strict"
        )
    return mode


def _dry_run(query: Mapping[str, str]) -> bool:
    values = query.getall("dryRun", []) if hasattr(query, "getall") else []
    for value in values:
        if value != "All":
            raise BadRequestError(f'Invalid dryRun value: "{value}"; must be "All"')
    return bool(values)


async def _read_object(
    ctx: ApiContext, request: web.Request, target: Target
) -> tuple[JsonObject, list[str]]:
    body, duplicates = decode_body(await request.read(), request.headers.get("Content-Type", ""))
    if not isinstance(body, dict):
        raise BadRequestError("the body of the request must be a JSON object")
    resource = target.resource
    kind = body.get("kind")
    if target.subresource is None and kind and kind != resource.kind:
        raise BadRequestError(
            f"the kind in the request body ({kind}) does not match the kind of the URL "
            f"({resource.kind})"
        )
    return _validate_fields(ctx, request, target, body, duplicates)


def _validate_fields(
    ctx: ApiContext,
    request: web.Request,
    target: Target,
    body: JsonObject,
    duplicates: list[str],
) -> tuple[JsonObject, list[str]]:
    mode = _field_validation(request.query)
    resource = target.resource
    custom = ctx.custom_validators.get(resource.key)
    if custom is not None:
        return custom(body, mode)
    return check_fields(body, resource, mode=mode, duplicates=duplicates)


async def _create(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    obj, warnings = await _read_object(ctx, request, target)
    created = ctx.registry.create(
        target.resource,
        obj,
        namespace=target.namespace or "",
        dry_run=_dry_run(request.query),
    )
    return json_response(created, status=201, warnings=[warning_header(w) for w in warnings])


async def _update(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    assert target.name is not None
    obj, warnings = await _read_object(ctx, request, target)
    resource = target.resource
    if target.subresource == "finalize":
        current = ctx.registry.get(resource, "", target.name)
        wanted = obj.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ConflictError.stale(resource.plural, resource.group, target.name)
        finalizers = obj.get("spec", {}).get("finalizers") or []

        def set_finalizers(namespace: JsonObject) -> None:
            namespace.setdefault("spec", {})["finalizers"] = finalizers

        updated = ctx.registry.mutate(resource, "", target.name, set_finalizers)
        return json_response(updated)
    updated = ctx.registry.update(
        resource,
        obj,
        namespace=_object_namespace(target),
        name=target.name,
        subresource=target.subresource,
        dry_run=_dry_run(request.query),
    )
    return json_response(updated, warnings=[warning_header(w) for w in warnings])


async def _patch(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    assert target.name is not None
    resource = target.resource
    namespace = _object_namespace(target)
    current = ctx.registry.get(resource, namespace, target.name)
    patched = apply_patch(
        current,
        await request.read(),
        request.headers.get("Content-Type", ""),
        custom_resource=resource.model is None and resource.group not in ("",),
    )
    if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
        raise BadRequestError("the patched object must keep its metadata")
    if patched["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
        raise ConflictError.stale(resource.plural, resource.group, target.name)
    patched, warnings = _validate_fields(ctx, request, target, patched, [])
    patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    updated = ctx.registry.update(
        resource,
        patched,
        namespace=namespace,
        name=target.name,
        subresource=target.subresource,
        dry_run=_dry_run(request.query),
    )
    return json_response(updated, warnings=[warning_header(w) for w in warnings])


async def _delete_options(request: web.Request) -> DeleteOptions:
    """DeleteOptions from the body and query. Typed clients (kubectl drain) send a protobuf
    body, which kubesim cannot decode: it is ignored and the defaults apply."""
    raw = await request.read()
    body: Any = None
    content_type = request.headers.get("Content-Type", "")
    if raw.strip() and "protobuf" not in content_type:
        body, _ = decode_body(raw, content_type or "application/json")
        if not isinstance(body, dict):
            raise BadRequestError("DeleteOptions must be a JSON object")
    options = DeleteOptions.from_body(body, dict(request.query))
    if _dry_run(request.query) and not options.dry_run:
        options = DeleteOptions(
            grace_period_seconds=options.grace_period_seconds,
            propagation_policy=options.propagation_policy,
            precondition_uid=options.precondition_uid,
            precondition_resource_version=options.precondition_resource_version,
            dry_run=True,
        )
    return options


async def _delete(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    assert target.name is not None
    options = await _delete_options(request)
    obj, _removed = ctx.registry.delete(
        target.resource, _object_namespace(target), target.name, options
    )
    return json_response(obj)


async def _delete_collection(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    options = await _delete_options(request)
    resource = target.resource
    labels = parse_label_selector(request.query.get("labelSelector"))
    fields = parse_field_selector(request.query.get("fieldSelector"), resource)
    deleted = []
    for obj in ctx.store.list(resource, target.namespace if resource.namespaced else None):
        if labels.matches(labels_of(obj)) and fields.matches(obj):
            meta = obj["metadata"]
            result, _ = ctx.registry.delete(
                resource, meta.get("namespace", ""), meta["name"], options
            )
            deleted.append(result)
    return json_response(
        {
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(ctx.store.revision)},
            "items": deleted,
        }
    )
