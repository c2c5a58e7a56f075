"""The aiohttp application of one simulated cluster: routes, error mapping, fault middleware.

`build_app` wires `/version`, health endpoints, OpenAPI, and the catch-all `/api` and `/apis`
handler; `error_middleware` is the single place a `KubeSimError` becomes an HTTP response
(Status body, code, Retry-After); `auth_middleware` authenticates (bearer token, then
impersonation headers) and authorizes every request but the `/_kubesim/` admin hooks, as
kube-apiserver's filter chain does: 401 for unknown credentials, 403 when RBAC refuses. The
admin token with no impersonation skips both (one string comparison), so kubesim's own tests
and benchmarks pay nothing for RBAC. Called by `kubesim.cluster` when a cluster starts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from kubesim.apiserver import discovery
from kubesim.apiserver.authn import (
    ADMIN,
    ADMIN_TOKEN,
    AUTHENTICATED,
    UserInfo,
    service_account_user,
    split_service_account,
)
from kubesim.apiserver.context import API_CONTEXT, REQUEST_USER, ApiContext, json_response
from kubesim.apiserver.faults import FAULTS, FaultInjector, fault_middleware
from kubesim.apiserver.handlers import handle_api
from kubesim.apiserver.rbac import RequestAttributes, forbidden, request_attributes
from kubesim.errors import (
    InternalError,
    KubeSimError,
    NotFoundError,
    UnauthorizedError,
    status_body,
)

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


_ADMIN_HEADER = f"Bearer {ADMIN_TOKEN}"
_IMPERSONATE_USER = "Impersonate-User"
_IMPERSONATE_GROUP = "Impersonate-Group"
_IMPERSONATE_UID = "Impersonate-Uid"
_IMPERSONATE_EXTRA = "impersonate-extra-"


def _impersonating(headers: Mapping[str, str]) -> bool:
    return any(key.lower().startswith("impersonate-") for key in headers)


def _authenticate(ctx: ApiContext, header: str | None) -> UserInfo:
    if header is None:
        if ctx.anonymous_is_admin:
            return ADMIN
        return UserInfo("system:anonymous", groups=("system:unauthenticated",))
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("Unauthorized")
    return ctx.authenticate_token(token.strip())


def _impersonate(ctx: ApiContext, requester: UserInfo, request: web.Request) -> UserInfo:
    """The user named by Impersonate-* headers, once the requester may impersonate them."""
    headers = request.headers
    name = headers.get(_IMPERSONATE_USER)
    groups = tuple(headers.getall(_IMPERSONATE_GROUP, ()))
    uid = headers.get(_IMPERSONATE_UID, "")
    extra: dict[str, tuple[str, ...]] = {}
    for key in headers:
        if key.lower().startswith(_IMPERSONATE_EXTRA):
            extra[key[len(_IMPERSONATE_EXTRA) :].lower()] = tuple(headers.getall(key))
    if not name:
        raise InternalError(
            "requested impersonation of groups, uid or extra without impersonating a user"
        )
    account = split_service_account(name)
    checks = [
        RequestAttributes(
            verb="impersonate",
            resource_request=True,
            resource="serviceaccounts" if account else "users",
            namespace=account[0] if account else "",
            name=account[1] if account else name,
        ),
        *(
            RequestAttributes(
                verb="impersonate", resource_request=True, resource="groups", name=group
            )
            for group in groups
        ),
    ]
    if uid:
        checks.append(
            RequestAttributes(
                verb="impersonate",
                resource_request=True,
                api_group="authentication.k8s.io",
                resource="uids",
                name=uid,
            )
        )
    for check in checks:
        if not ctx.authorizer.authorize(requester, check).allowed:
            raise forbidden(requester, check)
    if account and not groups:
        groups = service_account_user(*account).groups
    if name != "system:anonymous" and AUTHENTICATED not in groups:
        groups = (*groups, AUTHENTICATED)
    return UserInfo(name, uid=uid, groups=groups, extra=extra)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith("/_kubesim/"):
        return await handler(request)
    ctx = request.app[API_CONTEXT]
    header = request.headers.get("Authorization")
    impersonating = _impersonating(request.headers)
    if (header == _ADMIN_HEADER or (header is None and ctx.anonymous_is_admin)) and (
        not impersonating
    ):
        return await handler(request)  # the admin: system:masters may do anything
    user = _authenticate(ctx, header)
    if impersonating:
        user = _impersonate(ctx, user, request)
    request[REQUEST_USER] = user
    if not user.is_master:
        attributes = request_attributes(request.method, request.path, request.query)
        if not ctx.authorizer.authorize(user, attributes).allowed:
            raise forbidden(user, attributes)
    return await handler(request)


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
        middlewares=[error_middleware, auth_middleware, fault_middleware],
        client_max_size=16 * 1024**2,
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
