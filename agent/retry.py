"""Named tenacity retry policies: the only place the agent decides what is worth retrying.

Only classified transient errors are retried — `K8sConnectionError`, `K8sServerError` and
`K8sTooManyRequestsError` (waiting at least its Retry-After) for Kubernetes calls, and
`HubUnreachableError` for the hub session. Conflicts, validation errors and the rest are not
retried: callers re-read and recompute. Every attempt is logged as "attempt n/N".

Called by: agent.k8s.client (writes and lists, through `k8s_call`), agent.hubclient
(reconnect loop).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_exponential_jitter,
)

from agent.errors import (
    HubUnreachableError,
    K8sConnectionError,
    K8sError,
    K8sServerError,
    K8sTooManyRequestsError,
)

__all__ = ["K8S_TRANSIENT", "call", "hub_reconnect", "k8s_call", "k8s_transient"]

log = logging.getLogger(__name__)

T = TypeVar("T")

K8S_TRANSIENT: tuple[type[K8sError], ...] = (
    K8sConnectionError,
    K8sServerError,
    K8sTooManyRequestsError,
)
"""The Kubernetes errors a retry can cure."""


def _log_attempt(name: str, attempts: int | None) -> Callable[[RetryCallState], None]:
    total = "∞" if attempts is None else str(attempts)

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        level = (
            logging.WARNING if attempts and state.attempt_number >= attempts - 1 else logging.INFO
        )
        log.log(
            level,
            "%s: attempt %d/%s failed (%s); retrying in %.2fs",
            name,
            state.attempt_number,
            total,
            exc,
            state.next_action.sleep if state.next_action else 0.0,
        )

    return before_sleep


class _WaitWithRetryAfter:
    """Exponential backoff with jitter, but never shorter than a 429's Retry-After."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._base = wait_exponential_jitter(multiplier=initial, max=maximum, jitter=initial)

    def __call__(self, state: RetryCallState) -> float:
        delay = float(self._base(state))
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, K8sError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return delay


def k8s_transient(
    name: str, *, attempts: int = 5, initial: float = 0.2, maximum: float = 5.0
) -> AsyncRetrying:
    """Retry a Kubernetes call on transient errors only, `attempts` times in all."""
    return AsyncRetrying(
        retry=retry_if_exception_type(K8S_TRANSIENT),
        wait=_WaitWithRetryAfter(initial, maximum),
        stop=stop_after_attempt(attempts),
        before_sleep=_log_attempt(name, attempts),
        reraise=True,
    )


class _QuickThenBackoff:
    """Exponential backoff with jitter, but at most `quick_max` while the outage is younger
    than `quick_for` seconds."""

    def __init__(self, initial: float, maximum: float, quick_max: float, quick_for: float) -> None:
        self._base = wait_exponential_jitter(multiplier=initial, max=maximum, jitter=initial)
        self._quick_max = quick_max
        self._quick_for = quick_for

    def __call__(self, state: RetryCallState) -> float:
        delay = float(self._base(state))
        if (state.seconds_since_start or 0.0) < self._quick_for:
            delay = min(delay, self._quick_max)
        return delay


def hub_reconnect(
    *,
    initial: float = 0.5,
    maximum: float = 30.0,
    quick_max: float = 1.0,
    quick_for: float = 60.0,
) -> AsyncRetrying:
    """Reconnect to the hub forever: capped exponential backoff with jitter — but for the
    first `quick_for` seconds at least every `quick_max`, so that a hub restart or a change
    of leader (several hubs) does not leave the agent away for the backoff's cap."""
    return AsyncRetrying(
        retry=retry_if_exception_type(HubUnreachableError),
        wait=_QuickThenBackoff(initial, maximum, quick_max, quick_for),
        stop=stop_never,
        before_sleep=_log_attempt("hub session", None),
        reraise=True,
    )


async def k8s_call(
    name: str,
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = 5,
    initial: float = 0.2,
    maximum: float = 5.0,
) -> T:
    """Run `fn` under `k8s_transient(name, ...)`, building the policy only when needed.

    Nearly every Kubernetes call succeeds at once, and a tenacity policy per call (built,
    iterated, then left as cyclic garbage of some 50 objects) cost about 16 µs a call. So
    the first attempt runs bare; if it fails transiently, the policy takes over with that
    failure as its attempt 1, so attempts are counted, logged and spaced as they would be
    had the policy run from the start.
    """
    try:
        return await fn()
    except K8S_TRANSIENT as exc:
        first: BaseException | None = exc

    async def attempt() -> T:
        nonlocal first
        if first is not None:
            failure, first = first, None
            raise failure
        return await fn()

    policy = k8s_transient(name, attempts=attempts, initial=initial, maximum=maximum)
    return await call(policy, attempt)


async def call(policy: AsyncRetrying, fn: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine factory `fn` under `policy` (small helper for the facade)."""
    async for attempt in policy:
        with attempt:
            return await fn()
    raise AssertionError("unreachable")  # pragma: no cover
