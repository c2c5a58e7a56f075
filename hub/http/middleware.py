"""Cross-cutting HTTP concerns, in one place: turning HubErrors (and store/aiohttp failures)
into Kubernetes Status replies, authenticating the caller, bounding request bodies, and
encoding object replies (`json_reply`).

Called by: hub.app (installs the middlewares); handlers read `request[PRINCIPAL]`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from api.errors import ApiError, FieldError
from api.limits import DEFAULT_LIMITS, parse_json_object, parse_yaml_object
from hub.auth import Principal, TokenAuthority
from hub.errors import (
    BadRequestError,
    HubError,
    NotFoundError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
    from_api_error,
    status_body,
)
from hub.store.base import JsonObject, encode_json
from hub.ui import UI_PATHS

__all__ = [
    "PRINCIPAL",
    "error_middleware",
    "int_param",
    "json_reply",
    "make_auth_middleware",
    "read_body",
]

log = logging.getLogger(__name__)

PRINCIPAL = web.RequestKey("principal", Principal)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Paths anyone may read without a token: liveness, the API description, the metrics
# (Prometheus scrapes without a token; they hold counts, no workload or user's data) and the
# dashboard's static files (hub.ui: the same for everyone, no data; the page's API calls carry
# a token).
PUBLIC_PATHS = (
    frozenset({"/healthz", "/readyz", "/version", "/openapi.json", "/metrics"}) | UI_PATHS
)
JSON_TYPES = frozenset({"application/json", "application/merge-patch+json", ""})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})


_NON_NEGATIVE = re.compile(r"[0-9]{1,18}")


def int_param(query: Mapping[str, str], name: str) -> int | None:
    """A whole-number query parameter (`tailLines`, `timeoutSeconds`, …): None when absent or
    empty; anything but up to 18 decimal digits is a 400 naming it."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    if _NON_NEGATIVE.fullmatch(raw) is None:
        raise BadRequestError(
            f"{name} must be a non-negative integer (at most 18 digits), not {raw!r}",
            causes=[FieldError.invalid(name, raw, "must be a non-negative integer")],
        )
    return int(raw)


def json_reply(body: JsonObject, *, status: int = 200) -> web.Response:
    """An object (or list) as a JSON reply, encoded as the store encodes values: compact,
    non-ASCII kept, and a stored object's spec not encoded again (the reply of a submission
    or a create shares the spec dict just stored). `web.json_response`'s standard library
    encoder cost a submission's 201 about three times as much."""
    return web.Response(text=encode_json(body), status=status, content_type="application/json")


def error_reply(error: HubError) -> web.Response:
    return web.json_response(status_body(error), status=error.status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except HubError as exc:
        return error_reply(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return error_reply(PayloadTooLargeError(f"request body too large: {exc.text}"))
    except web.HTTPNotFound:
        return error_reply(NotFoundError(f"no route for {request.method} {request.path}"))
    except web.HTTPException as exc:
        if exc.status >= 400:
            return error_reply(HubError(exc.reason, status=exc.status))
        raise
    except ConnectionResetError:
        # The client hung up (a watch or a log stream it stopped reading): there is no one to
        # answer, and aiohttp closes the connection quietly. Not the hub's error.
        raise
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_reply(HubError("internal error; see the hub's log"))


def make_auth_middleware(authority: TokenAuthority) -> Middleware:
    @web.middleware
    async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in PUBLIC_PATHS:
            request[PRINCIPAL] = await authority.authenticate(request.headers.get("Authorization"))
        return await handler(request)

    return auth_middleware


async def read_body(request: web.Request) -> dict[str, Any]:
    """A JSON or YAML object from the request body, within api.limits' bounds (aiohttp
    enforces client_max_size): a 400 if it is not an object, a 422 naming each field that
    breaks a limit (depth, string and list lengths, 64-bit integers, finite numbers)."""
    content_type = request.content_type
    raw = await request.read()
    if not raw:
        raise BadRequestError("the request has no body")
    if content_type in JSON_TYPES:
        parse = parse_json_object
    elif content_type in YAML_TYPES:
        parse = parse_yaml_object
    else:
        raise UnsupportedMediaTypeError(
            f"content type {content_type!r} is not supported; use application/json or "
            "application/yaml"
        )
    try:
        return parse(raw, DEFAULT_LIMITS)
    except ApiError as exc:
        raise from_api_error(exc) from exc
