"""The aiohttp application of one simulated cluster: routes, error mapping, fault middleware.

`build_app` wires `/version`, health endpoints, OpenAPI, and the catch-all `/api` and `/apis`
handler; `error_middleware` is the single place a `KubeSimError` becomes an HTTP response
(Status body, code, Retry-After). Called by `kubesim.cluster` when a cluster starts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from kubesim.apiserver import discovery
from kubesim.apiserver.context import API_CONTEXT, ApiContext, json_response
from kubesim.apiserver.faults import FAULTS, FaultInjector, fault_middleware
from kubesim.apiserver.handlers import handle_api
from kubesim.errors import InternalError, KubeSimError, NotFoundError, status_body

__all__ = ["build_app", "error_middleware"]

_log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except KubeSimError as error:
        return _error_response(error)
    except web.HTTPException:
        raise
    except Exception as error:  # a kubesim bug: answer like an apiserver would, and log it
        _log.exception("internal error serving %s %s", request.method, request.path)
        return _error_response(InternalError(f"Internal error occurred: {error!r}"))


def _error_response(error: KubeSimError) -> web.Response:
    response = json_response(status_body(error), status=error.code)
    if error.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    return response


async def _version(_: web.Request) -> web.Response:
    return json_response(discovery.VERSION_INFO)


async def _healthy(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _openapi_v3(request: web.Request) -> web.Response:
    ctx = request.app[API_CONTEXT]
    tail = request.match_info.get("tail", "")
    if not tail:
        return json_response(discovery.openapi_root(ctx.types))
    parts = tail.split("/")
    if parts[0] == "api" and len(parts) == 2:
        document = discovery.openapi_group_version(ctx.types, "", parts[1])
    elif parts[0] == "apis" and len(parts) == 3:
        document = discovery.openapi_group_version(ctx.types, parts[1], parts[2])
    else:
        document = None
    if document is None:
        raise NotFoundError("the server could not find the requested resource")
    return json_response(document)


async def _not_found(_: web.Request) -> web.Response:
    raise NotFoundError("the server could not find the requested resource")


def build_app(
    ctx: ApiContext,
    faults: FaultInjector,
    *,
    add_admin_routes: Callable[[web.Application], None] | None = None,
) -> web.Application:
    app = web.Application(
        middlewares=[error_middleware, fault_middleware], client_max_size=16 * 1024**2
    )
    app[API_CONTEXT] = ctx
    app[FAULTS] = faults
    app.router.add_get("/version", _version)
    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, _healthy)
    app.router.add_get("/openapi/v3", _openapi_v3)
    app.router.add_get("/openapi/v3/{tail:.*}", _openapi_v3)
    app.router.add_get("/openapi/v2", _not_found)
    if add_admin_routes is not None:
        add_admin_routes(app)
    for prefix in ("/api", "/apis"):
        app.router.add_route("*", prefix, handle_api)
        app.router.add_route("*", prefix + "/{tail:.*}", handle_api)
    return app
