"""The rules both of qctl's hub clients follow when given several hubs (they share one store;
one leads, the others forward writes to it): the hub that answered last is tried first, the
next one when a hub cannot be reached, and only a read is sent again after a connection broke
mid-request (a write may have been done). And what both trust over https: the context's
certificate authority, else the system's, and the one line they say when that fails.

Called by: qctl.client (aiohttp, streams) and qctl.rest (http.client, one-shot commands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from qctl.errors import QctlError, UsageError

if TYPE_CHECKING:
    import ssl

__all__ = [
    "FAILOVER_CONNECT_SECONDS",
    "PLAIN_HTTP_HINT",
    "READS",
    "HubRotation",
    "tls_context",
    "untrusted_certificate",
]

# Said when a hub closes a plain-HTTP connection without a word: what a TLS hub does.
PLAIN_HTTP_HINT = " (if the hub serves TLS, use an https:// URL)"

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


def tls_context(certificate_authority: str | None) -> ssl.SSLContext:
    """What to trust for an https hub: the given CA bundle, else the system's CAs."""
    import ssl  # noqa: PLC0415 - only an https hub needs it

    try:
        return ssl.create_default_context(cafile=certificate_authority)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(
            f"cannot load the certificate authority {certificate_authority}: {exc}"
        ) from exc


def untrusted_certificate(server: str, detail: str | None) -> str:
    return (
        f"the hub at {server} presented a certificate qctl does not trust "
        f"({detail or 'certificate verify failed'}): pass --certificate-authority FILE "
        "or set certificateAuthority in the context"
    )
