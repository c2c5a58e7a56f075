"""The hub's errors, and the one place they become HTTP statuses.

    HubError                          500  something the hub did not expect
    ├── UnreadableWriteError          500  the hub's own write would make an object unreadable
    ├── BadRequestError               400  malformed request (bad JSON/YAML, bad query parameter)
    │   └── InvalidObjectError        422  an object broke rules; carries every FieldError
    ├── UnauthorizedError             401  no or unknown bearer token
    ├── ForbiddenError                403  the caller may not do this (wrong tenant, not an admin)
    ├── NotFoundError                 404  no such object or route
    ├── AlreadyExistsError            409  create of an existing name
    ├── ConflictError                 409  resourceVersion mismatch on update/delete
    ├── GoneError                     410  a watch asked for history that was compacted
    ├── PayloadTooLargeError          413  request body over the configured limit
    ├── UnsupportedMediaTypeError     415  body in a content type we do not read
    ├── UnavailableError              503  store or leader not available; retry
    └── SettingsError                 —    a file the settings name is unusable (start-up only)

Errors of the contract layer (api.errors) become hub errors here too (`from_api_error`): a body
that is not a JSON/YAML object is a 400, an unknown apiVersion/kind a 400 naming the field, an
object that breaks rules or input limits a 422 with every field error.

Responses are Kubernetes Status objects (kind Status, status Failure, reason, code, message,
details.causes for field errors), so kubectl-style clients and qctl read them alike.
Called by: every hub HTTP handler (raises) and hub.http.middleware (maps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.errors import ApiError, FieldError, ObjectInvalidError, UnknownKindError

__all__ = [
    "AlreadyExistsError",
    "BadRequestError",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "HubError",
    "InvalidObjectError",
    "NotFoundError",
    "PayloadTooLargeError",
    "SettingsError",
    "UnauthorizedError",
    "UnavailableError",
    "UnreadableWriteError",
    "UnsupportedMediaTypeError",
    "from_api_error",
    "status_body",
]


class HubError(Exception):
    status: int = 500
    reason: str = "InternalError"

    def __init__(
        self, message: str, *, causes: Sequence[FieldError] = (), status: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.causes = tuple(causes)
        if status is not None:
            self.status = status


class UnreadableWriteError(HubError):
    """A server-side read-modify-write (status the hub computes) produced an object its own
    models refuse: a bug in the hub, caught before it is stored. Written, such an object
    would make every later read of it fail (the hub's mirrors included)."""


class BadRequestError(HubError):
    status = 400
    reason = "BadRequest"


class InvalidObjectError(BadRequestError):
    status = 422
    reason = "Invalid"


class UnauthorizedError(HubError):
    status = 401
    reason = "Unauthorized"


class ForbiddenError(HubError):
    status = 403
    reason = "Forbidden"


class NotFoundError(HubError):
    status = 404
    reason = "NotFound"


class AlreadyExistsError(HubError):
    status = 409
    reason = "AlreadyExists"


class ConflictError(HubError):
    status = 409
    reason = "Conflict"


class GoneError(HubError):
    status = 410
    reason = "Expired"


class PayloadTooLargeError(HubError):
    status = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaTypeError(HubError):
    status = 415
    reason = "UnsupportedMediaType"


class UnavailableError(HubError):
    status = 503
    reason = "ServiceUnavailable"


class SettingsError(HubError):
    """The hub cannot start as configured (a users file with plaintext tokens, a TLS key that
    does not load): never an HTTP answer, hub.main prints it and exits."""

    reason = "SettingsInvalid"


def from_api_error(exc: ApiError) -> HubError:
    """The hub's error for a contract-layer error (the one map from api.errors)."""
    if isinstance(exc, ObjectInvalidError):
        return InvalidObjectError(str(exc), causes=exc.errors)
    if isinstance(exc, UnknownKindError):
        known = {name.rpartition("/")[2] for name in exc.supported}
        field = "apiVersion" if isinstance(exc.kind, str) and exc.kind in known else "kind"
        value = exc.api_version if field == "apiVersion" else exc.kind
        cause = FieldError.unsupported(field, value, exc.supported)
        return BadRequestError(str(exc), causes=[cause])
    return BadRequestError(str(exc))


def status_body(error: HubError) -> dict[str, Any]:
    """The Kubernetes Status object for an error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason,
        "code": error.status,
    }
    if error.causes:
        body["details"] = {"causes": [c.to_dict() for c in error.causes]}
    return body
