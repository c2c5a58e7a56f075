"""The pod subresources that are more than CRUD: log (with follow), binding and eviction.

`logs` streams a container's log as text/plain, honouring follow, previous, tailLines,
sinceSeconds/sinceTime, timestamps and limitBytes, with the apiserver's 400s for ambiguous or
not-yet-started containers. `bind_pod` is shared by the binding subresource and the scheduler.
Dispatched from `kubesim.apiserver.handlers`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from kubesim.apiserver.context import ApiContext, Target, go_bool, json_response
from kubesim.apiserver.registry import DeleteOptions, ObjectRegistry
from kubesim.apiserver.validation import decode_body
from kubesim.errors import BadRequestError, ConflictError
from kubesim.logs import ContainerLog
from kubesim.objects import JsonObject, now, parse_time, rfc3339

__all__ = ["bind", "bind_pod", "evict", "logs"]


async def bind(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    assert target.name is not None
    body, _ = decode_body(await request.read(), request.headers.get("Content-Type", ""))
    node = (body or {}).get("target", {}).get("name") if isinstance(body, dict) else None
    if not node:
        raise BadRequestError("binding target name is required")
    namespace = target.namespace or ""
    pod = ctx.registry.get(target.resource, namespace, target.name)
    if pod.get("spec", {}).get("nodeName"):
        raise ConflictError(
            f'pod {target.name} is already assigned to node "{pod["spec"]["nodeName"]}"',
            name=target.name,
            kind="pods",
            group="",
        )
    bind_pod(ctx.registry, pod, node)
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        status=201,
    )


async def evict(ctx: ApiContext, request: web.Request, target: Target) -> web.Response:
    """policy/v1 Eviction: a graceful delete (kubesim has no PodDisruptionBudgets to honour).

    `kubectl drain` posts the Eviction as protobuf; everything kubesim needs is in the URL, so
    a protobuf body is accepted here (and only here) and its delete options are not read.
    """
    assert target.name is not None
    content_type = request.headers.get("Content-Type", "")
    raw = await request.read()
    body: Any = None
    if "protobuf" not in content_type and raw.strip():
        body, _ = decode_body(raw, content_type)
    options = body.get("deleteOptions") if isinstance(body, dict) else None
    ctx.registry.delete(
        target.resource,
        target.namespace or "",
        target.name,
        DeleteOptions.from_body(options, {}),
    )
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        status=201,
    )


def bind_pod(registry: ObjectRegistry, pod: JsonObject, node: str) -> JsonObject | None:
    """Set spec.nodeName and PodScheduled=True (the scheduler and the binding subresource)."""
    stamp = rfc3339()

    def bind(new: JsonObject) -> None:
        new["spec"] = {**new["spec"], "nodeName": node}  # replaced: the spec is shared
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            }
        )
        status["conditions"] = conditions

    meta = pod["metadata"]
    return registry.mutate(
        registry.pods, meta["namespace"], meta["name"], bind, touches=("status",)
    )


# -- logs -------------------------------------------------------------------------------------


def _choose_container(pod: JsonObject, requested: str | None) -> str:
    spec = pod.get("spec", {})
    names = [c["name"] for c in spec.get("containers") or []]
    init_names = [c["name"] for c in spec.get("initContainers") or []]
    name = pod["metadata"]["name"]
    if requested:
        if requested not in names and requested not in init_names:
            raise BadRequestError(f"container {requested} is not valid for pod {name}")
        return requested
    default = (pod["metadata"].get("annotations") or {}).get(
        "kubectl.kubernetes.io/default-container"
    )
    if default in names:
        return str(default)
    if len(names) == 1:
        return str(names[0])
    raise BadRequestError(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
        + (f" or one of the init containers: [{' '.join(init_names)}]" if init_names else "")
    )


def _log_start(log: ContainerLog, query: Mapping[str, str]) -> int:
    start = log.dropped
    lines = log.lines
    if query.get("sinceSeconds") or query.get("sinceTime"):
        if query.get("sinceSeconds"):
            cutoff = now() - dt.timedelta(seconds=int(query["sinceSeconds"]))
        else:
            cutoff = parse_time(query["sinceTime"])
        skip = next((i for i, line in enumerate(lines) if line.at >= cutoff), len(lines))
        start = log.dropped + skip
    if query.get("tailLines") is not None:
        tail = int(query["tailLines"])
        start = max(start, log.dropped + len(lines) - tail)
    return start


async def logs(ctx: ApiContext, request: web.Request, target: Target) -> web.StreamResponse:
    assert target.name is not None
    query = request.query
    pod = ctx.registry.get(target.resource, target.namespace or "", target.name)
    container = _choose_container(pod, query.get("container"))
    log = ctx.logs.get(pod["metadata"]["uid"], container)
    if go_bool(query.get("previous")):
        if log is None or log.previous is None:
            raise BadRequestError(
                f'previous terminated container "{container}" in pod "{target.name}" not found'
            )
        log = log.previous
    if log is None:
        raise BadRequestError(
            f'container "{container}" in pod "{target.name}" is waiting to start: ContainerCreating'
        )
    follow = go_bool(query.get("follow"))
    timestamps = go_bool(query.get("timestamps"))
    limit_bytes = int(query["limitBytes"]) if query.get("limitBytes") else None
    response = web.StreamResponse(status=200)
    response.content_type = "text/plain"
    response.enable_chunked_encoding()
    await response.prepare(request)
    sent = 0
    start = _log_start(log, query)
    try:
        if follow:
            # One write per batch of lines there are, not per line: a write is most of the
            # cost of a line (kubesim serves every log of both clusters on one core).
            async for batch in log.follow(start):
                data = b"".join(
                    [line.stamp + line.text for line in batch]
                    if timestamps
                    else [line.text for line in batch]
                )
                if limit_bytes is not None and sent + len(data) > limit_bytes:
                    await response.write(data[: limit_bytes - sent])
                    break
                sent += len(data)
                await response.write(data)
        else:
            offset = max(0, start - log.dropped)
            chunk = b"".join(
                (line.stamped() if timestamps else line.text) for line in log.lines[offset:]
            )
            if limit_bytes is not None:
                chunk = chunk[:limit_bytes]
            await response.write(chunk)
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    return response
