"""The kubesim error tree and its one mapping onto Kubernetes `Status` objects.

Every failure a client can see is raised as a `KubeSimError` subclass somewhere in the API
server or the controllers; the HTTP layer (`kubesim.apiserver.app`) turns it into a
`{"kind": "Status", ...}` body with `status_body`, which is the only place reason and code
meet. Messages copy the real kube-apiserver wording because clients grep them (the 409
Conflict text above all). Class names end in Error; the `reason` they carry is the
Kubernetes one.

    KubeSimError                   code  reason
     ├── BadRequestError            400  BadRequest
     ├── UnauthorizedError          401  Unauthorized
     ├── ForbiddenError             403  Forbidden
     ├── NotFoundError              404  NotFound
     ├── MethodNotAllowedError      405  MethodNotAllowed
     ├── NotAcceptableError         406  NotAcceptable
     ├── AlreadyExistsError         409  AlreadyExists
     ├── ConflictError              409  Conflict
     ├── ExpiredError               410  Expired
     ├── UnsupportedMediaTypeError  415  UnsupportedMediaType
     ├── InvalidError               422  Invalid (with field causes)
     ├── TooManyRequestsError       429  TooManyRequests (Retry-After)
     ├── InternalError              500  InternalError
     └── ServerTimeoutError         504  Timeout
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "AlreadyExistsError",
    "BadRequestError",
    "Cause",
    "ConflictError",
    "ExpiredError",
    "ForbiddenError",
    "InternalError",
    "InvalidError",
    "KubeSimError",
    "MethodNotAllowedError",
    "NotAcceptableError",
    "NotFoundError",
    "ServerTimeoutError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "qualified_resource",
    "status_body",
]


def qualified_resource(plural: str, group: str) -> str:
    """`pods` for the core group, `jobs.batch` otherwise, as apiserver messages spell it."""
    return f"{plural}.{group}" if group else plural


@dataclass(frozen=True)
class Cause:
    """One field-level reason inside an InvalidError (or BadRequestError) Status."""

    field: str
    reason: str
    message: str


class KubeSimError(Exception):
    """Base of every error kubesim answers with; carries what a Status object needs."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        causes: tuple[Cause, ...] = (),
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.causes = causes
        self.retry_after_seconds = retry_after_seconds


class BadRequestError(KubeSimError):
    """Malformed input: bad selector, undecodable body, unknown field under Strict."""

    code = 400
    reason = "BadRequest"


class UnauthorizedError(KubeSimError):
    """No user could be authenticated from the request's credentials (an unknown token)."""

    code = 401
    reason = "Unauthorized"


class ForbiddenError(KubeSimError):
    """Refused by policy: RBAC denied the request, or creating into a Terminating namespace."""

    code = 403
    reason = "Forbidden"


class NotFoundError(KubeSimError):
    """The object, namespace or route does not exist."""

    code = 404
    reason = "NotFound"

    @classmethod
    def of(cls, plural: str, group: str, name: str) -> NotFoundError:
        return cls(
            f'{qualified_resource(plural, group)} "{name}" not found',
            name=name,
            group=group,
            kind=plural,
        )


class MethodNotAllowedError(KubeSimError):
    """The verb is not served for this resource."""

    code = 405
    reason = "MethodNotAllowed"


class NotAcceptableError(KubeSimError):
    """The Accept header asks for a representation kubesim does not produce."""

    code = 406
    reason = "NotAcceptable"


class AlreadyExistsError(KubeSimError):
    """A create named an object that exists."""

    code = 409
    reason = "AlreadyExists"

    @classmethod
    def of(cls, plural: str, group: str, name: str) -> AlreadyExistsError:
        return cls(
            f'{qualified_resource(plural, group)} "{name}" already exists',
            name=name,
            group=group,
            kind=plural,
        )


class ConflictError(KubeSimError):
    """Optimistic concurrency failed: the resourceVersion (or a precondition) is stale."""

    code = 409
    reason = "Conflict"

    @classmethod
    def stale(cls, plural: str, group: str, name: str) -> ConflictError:
        return cls(
            f"Operation cannot be fulfilled on {qualified_resource(plural, group)} "
            f'"{name}": the object has been modified; please apply your changes to the '
            "latest version and try again",
            name=name,
            group=group,
            kind=plural,
        )


class ExpiredError(KubeSimError):
    """A resourceVersion or continue token older than the compacted history."""

    code = 410
    reason = "Expired"


class UnsupportedMediaTypeError(KubeSimError):
    """A body in a format kubesim does not decode (protobuf, server-side apply, ...)."""

    code = 415
    reason = "UnsupportedMediaType"


class InvalidError(KubeSimError):
    """Semantic validation failed; `causes` name the fields."""

    code = 422
    reason = "Invalid"

    @classmethod
    def of(cls, kind: str, group: str, name: str, causes: tuple[Cause, ...]) -> InvalidError:
        qualified_kind = f"{kind}.{group}" if group else kind
        detail = ", ".join(f"{c.field}: {c.message}" for c in causes)
        if len(causes) > 1:
            detail = f"[{detail}]"
        return cls(
            f'{qualified_kind} "{name}" is invalid: {detail}',
            name=name,
            group=group,
            kind=kind,
            causes=causes,
        )


class TooManyRequestsError(KubeSimError):
    """Throttled (only ever injected by the admin fault hooks)."""

    code = 429
    reason = "TooManyRequests"


class InternalError(KubeSimError):
    """A server-side failure (injected, or a kubesim bug surfaced honestly)."""

    code = 500
    reason = "InternalError"


class ServerTimeoutError(KubeSimError):
    """504, as the apiserver answers when a request outlives its deadline."""

    code = 504
    reason = "Timeout"


def status_body(error: KubeSimError) -> dict[str, Any]:
    """Render `error` as the Kubernetes `Status` object a real apiserver would send."""
    details: dict[str, Any] = {}
    if error.name is not None:
        details["name"] = error.name
    if error.group is not None:
        details["group"] = error.group
    if error.kind is not None:
        details["kind"] = error.kind
    if error.causes:
        details["causes"] = [
            {"reason": c.reason, "message": c.message, "field": c.field} for c in error.causes
        ]
    if error.retry_after_seconds is not None:
        details["retryAfterSeconds"] = error.retry_after_seconds
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason,
        "code": error.code,
    }
    if details:
        body["details"] = details
    return body
