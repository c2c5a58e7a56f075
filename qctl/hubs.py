"""The rules both of qctl's hub clients follow when given several hubs (they share one store;
one leads, the others forward writes to it): the hub that answered last is tried first, the
next one when a hub cannot be reached, and only a read is sent again after a connection broke
mid-request (a write may have been done).

Called by: qctl.client (aiohttp, streams) and qctl.rest (http.client, one-shot commands).
"""

from __future__ import annotations

from collections.abc import Sequence

from qctl.errors import QctlError

__all__ = ["FAILOVER_CONNECT_SECONDS", "READS", "HubRotation"]

# Safe to send to another hub even after the connection broke mid-request.
READS = frozenset({"GET", "HEAD", "OPTIONS"})
# With several hubs, how long to try connecting to one before moving on to the next.
FAILOVER_CONNECT_SECONDS = 3.0


class HubRotation:
    """Which hub to try next, remembering the one that answered last."""

    def __init__(self, servers: Sequence[str]) -> None:
        self.servers = tuple(servers)
        self.current = 0

    @property
    def server(self) -> str:
        """The hub requests go to first: the one that answered last."""
        return self.servers[self.current]

    def order(self) -> list[int]:
        """Indexes of the hubs to try, the one that answered last first."""
        count = len(self.servers)
        return [(self.current + i) % count for i in range(count)]

    def connect_timeout(self, timeout: float) -> float:
        """How long to wait for one hub's connection: less when another hub can be tried."""
        return timeout if len(self.servers) == 1 else min(timeout, FAILOVER_CONNECT_SECONDS)

    @staticmethod
    def unreachable(failures: Sequence[str]) -> QctlError:
        if len(failures) == 1:
            return QctlError(f"cannot reach the hub at {failures[0]}")
        return QctlError("cannot reach any hub:\n  " + "\n  ".join(failures))
