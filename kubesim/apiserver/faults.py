"""Fault injection for tests: fail the next N requests, or pause the server.

`FaultInjector` holds the armed faults of one cluster; `fault_middleware` applies them to
every API request except the admin paths (`/_kubesim/`), so a test can always disarm what it
armed. Armed through `kubesim.admin`; installed by `kubesim.apiserver.app`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from kubesim.errors import InternalError, KubeSimError, ServerTimeoutError, TooManyRequestsError

__all__ = ["ADMIN_PREFIX", "FaultInjector", "fault_middleware"]

ADMIN_PREFIX = "/_kubesim/"

_ERRORS: dict[int, Callable[[], KubeSimError]] = {
    429: lambda: TooManyRequestsError(
        "Too many requests, please try again later.", retry_after_seconds=1
    ),
    500: lambda: InternalError("Internal error occurred: injected by kubesim"),
    504: lambda: ServerTimeoutError(
        "The server was unable to return a response in the time allotted, but may still be "
        "processing the request"
    ),
}
SUPPORTED_CODES = frozenset(_ERRORS)


class FaultInjector:
    """The faults armed on one cluster."""

    def __init__(self) -> None:
        self._failures: list[int] = []
        self._running = asyncio.Event()
        self._running.set()

    def fail_next(self, count: int, code: int) -> None:
        if code not in _ERRORS:
            raise ValueError(f"unsupported fault code {code}; choose one of {sorted(_ERRORS)}")
        self._failures.extend([code] * count)

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def clear(self) -> None:
        self._failures.clear()
        self.resume()

    async def before_request(self) -> None:
        await self._running.wait()
        if self._failures:
            raise _ERRORS[self._failures.pop(0)]()


FAULTS = web.AppKey("kubesim_faults", FaultInjector)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith(ADMIN_PREFIX):
        await request.app[FAULTS].before_request()
    return await handler(request)
