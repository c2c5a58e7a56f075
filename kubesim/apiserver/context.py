"""What every API handler of one cluster shares: its context, parsed targets, JSON replies.

`ApiContext` is stored on the aiohttp application under `API_CONTEXT`; the authenticated user
of a request under `REQUEST_USER` (`request_user` reads it); `Target` is a parsed resource
URL; `json_response` renders bodies (and `Warning` headers); `go_bool` parses query booleans
the way apimachinery does. Used by `kubesim.apiserver.handlers`, `kubesim.apiserver.pods`,
`kubesim.apiserver.reviews`, `kubesim.apiserver.app` and `kubesim.admin`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from aiohttp import web

from kubesim.apiserver.authn import ADMIN, ADMIN_TOKEN, TokenIssuer, UserInfo
from kubesim.apiserver.rbac import RbacAuthorizer
from kubesim.apiserver.registry import ObjectRegistry
from kubesim.apiserver.store import Store
from kubesim.apiserver.watch import WatchHub
from kubesim.logs import LogBook
from kubesim.objects import JsonObject, now
from kubesim.resources import ResourceRegistry, ResourceType

__all__ = [
    "API_CONTEXT",
    "REQUEST_USER",
    "ApiContext",
    "CustomValidator",
    "Target",
    "go_bool",
    "json_response",
    "request_user",
    "warning_header",
]

# Validates a custom resource against its CRD schema; returns (pruned object, warnings).
CustomValidator = Callable[[JsonObject, str], tuple[JsonObject, list[str]]]


@dataclass(eq=False)
class ApiContext:
    """Everything the handlers of one simulated cluster need."""

    cluster_name: str
    types: ResourceRegistry
    store: Store
    registry: ObjectRegistry
    logs: LogBook
    tokens: TokenIssuer
    authorizer: RbacAuthorizer
    watches: WatchHub = field(default_factory=WatchHub)
    bookmark_interval: float = 5.0
    watch_max_seconds: float = 1800.0
    server_address: str = "127.0.0.1:0"
    custom_validators: dict[tuple[str, str], CustomValidator] = field(default_factory=dict)
    anonymous_is_admin: bool = True
    """A request without credentials is the admin (kube-apiserver: system:anonymous)."""
    audiences: tuple[str, ...] = ("https://kubernetes.default.svc.cluster.local",)

    def authenticate_token(self, token: str) -> UserInfo:
        """The user a bearer token stands for; UnauthorizedError if it stands for none."""
        if token == ADMIN_TOKEN:
            return ADMIN
        return self.tokens.verify(token, now=int(now().timestamp()))


API_CONTEXT = web.AppKey("kubesim_api_context", ApiContext)
REQUEST_USER = web.RequestKey("kubesim_user", UserInfo)


def request_user(request: web.Request) -> UserInfo:
    """Who sent the request (the authentication middleware stored it; the admin otherwise)."""
    user: UserInfo = request.get(REQUEST_USER, ADMIN)
    return user


def go_bool(value: str | None) -> bool:
    """apimachinery's query bool: absent, "0" and "false" (any case) are false; else true."""
    return value is not None and value.lower() not in ("0", "false")


def json_response(
    body: Any, *, status: int = 200, warnings: list[str] | None = None
) -> web.Response:
    response = web.Response(
        body=pydantic_core.to_json(body),
        status=status,
        content_type="application/json",
    )
    for warning in warnings or []:
        response.headers.add("Warning", f'299 - "{warning}"')
    return response


def warning_header(text: str) -> str:
    return text.replace('"', '\\"')


@dataclass(frozen=True)
class Target:
    """A parsed resource URL."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_prefix: bool
