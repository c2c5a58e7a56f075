"""The agent's error tree, and the one place Kubernetes statuses become classes.

    AgentError
    ├── K8sError                      a Kubernetes API call failed (status, reason, retry_after)
    │   ├── K8sConnectionError        no answer: refused, reset, timed out (transient)
    │   ├── K8sServerError            5xx (transient)
    │   └── K8sClientError            4xx
    │       ├── K8sNotFoundError           404
    │       ├── K8sConflictError           409 reason Conflict: stale resourceVersion — re-read
    │       ├── K8sAlreadyExistsError      409 reason AlreadyExists
    │       ├── K8sGoneError               410: the watch's resourceVersion is too old — relist
    │       ├── K8sInvalidError            422
    │       ├── K8sForbiddenError          401/403
    │       └── K8sTooManyRequestsError    429 (transient; honours Retry-After)
    ├── HubError                      the hub session failed
    │   ├── HubUnreachableError            connect/transport failure (reconnect)
    │   │   └── HubNotLeaderError          the hub answered but does not lead (names the leader)
    │   ├── HubRefusedError                the hub answered the upgrade with 4xx (bad token, …)
    │   └── ProtocolError             the hub sent something we cannot parse
    └── MaterializeError              an admitted workload's objects could not be built

kubernetes_asyncio's and aiohttp's exceptions never leave `agent.k8s.client`: they are mapped
here by `k8s_error` and chained as `__cause__`, so callers branch on classes, never on text.
Status bodies are truncated before they can reach logs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AgentError",
    "HubError",
    "HubNotLeaderError",
    "HubRefusedError",
    "HubUnreachableError",
    "K8sAlreadyExistsError",
    "K8sClientError",
    "K8sConflictError",
    "K8sConnectionError",
    "K8sError",
    "K8sForbiddenError",
    "K8sGoneError",
    "K8sInvalidError",
    "K8sNotFoundError",
    "K8sServerError",
    "K8sTooManyRequestsError",
    "MaterializeError",
    "ProtocolError",
    "k8s_error",
]

_MAX_MESSAGE = 500


class AgentError(Exception):
    """Base of every error the agent raises on purpose."""


class K8sError(AgentError):
    """A Kubernetes API call failed."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message[:_MAX_MESSAGE])
        self._status = status
        self._reason = reason
        self._retry_after = retry_after
        self._details = dict(details or {})

    @property
    def status(self) -> int:
        return self._status

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def retry_after(self) -> float | None:
        return self._retry_after

    @property
    def details(self) -> Mapping[str, Any]:
        return self._details


class K8sConnectionError(K8sError):
    """The API server did not answer (refused, reset, timed out)."""


class K8sServerError(K8sError):
    """The API server answered 5xx."""


class K8sClientError(K8sError):
    """The API server refused the request (4xx)."""


class K8sNotFoundError(K8sClientError):
    """404: the object (or namespace) does not exist."""


class K8sConflictError(K8sClientError):
    """409 Conflict: the object changed since it was read; re-read and recompute."""


class K8sAlreadyExistsError(K8sClientError):
    """409 AlreadyExists: an object of that name exists."""


class K8sGoneError(K8sClientError):
    """410 Gone / Expired: the resourceVersion is older than the server's history."""


class K8sInvalidError(K8sClientError):
    """422: the object broke the server's validation."""


class K8sForbiddenError(K8sClientError):
    """401 or 403: the agent's credentials may not do this."""


class K8sTooManyRequestsError(K8sClientError):
    """429: slow down; `retry_after` says for how long when the server said."""


class HubError(AgentError):
    """The session with the hub failed."""


class HubUnreachableError(HubError):
    """Connecting to the hub, or a lane's transport, failed; reconnecting may help."""


class HubNotLeaderError(HubUnreachableError):
    """The hub is up but does not lead (several hubs share one store); `leader` is the URL of
    the one that does, when it named one."""

    def __init__(self, message: str, *, leader: str | None) -> None:
        super().__init__(message)
        self.leader = leader


class HubRefusedError(HubError):
    """The hub refused the session (bad token, unknown cluster): `status` is its answer."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ProtocolError(HubError):
    """The hub sent a frame that is not a valid envelope for this lane."""


class MaterializeError(AgentError):
    """An admitted workload's source could not be turned into Kubernetes objects."""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


def k8s_error(status: int, body: bytes | str, headers: Mapping[str, str]) -> K8sError:
    """The K8sError class for an HTTP status and a metav1.Status body (the only mapping)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    reason = ""
    message = text
    details: Mapping[str, Any] = {}
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        reason = str(parsed.get("reason", ""))
        message = str(parsed.get("message", text))
        raw_details = parsed.get("details")
        if isinstance(raw_details, dict):
            details = raw_details
    kwargs: dict[str, Any] = {
        "status": status,
        "reason": reason,
        "retry_after": _retry_after(headers),
        "details": details,
    }
    message = f"{status} {reason}: {message}".strip()
    cls: type[K8sError]
    if status >= 500:
        cls = K8sServerError
    elif status == 404:
        cls = K8sNotFoundError
    elif status == 409:
        cls = K8sAlreadyExistsError if reason == "AlreadyExists" else K8sConflictError
    elif status == 410:
        cls = K8sGoneError
    elif status == 422:
        cls = K8sInvalidError
    elif status in (401, 403):
        cls = K8sForbiddenError
    elif status == 429:
        cls = K8sTooManyRequestsError
    elif status >= 400:
        cls = K8sClientError
    else:
        cls = K8sError
    return cls(message, **kwargs)
