"""Loopback ports picked now for processes that bind them later: free, distinct, and outside
the kernel's ephemeral range.

Why outside: a port chosen here is bound a moment later by another process (a hub, an etcd
member), and a chaos run or a test restarts that process on the same port. A port from
bind(0) is one the kernel hands out again — to another listener bound to port 0, to any
outgoing connection — in either gap; a port outside the range is only taken by a process that
names it. Why distinct: a port stays free until its process binds it, so two picks in a row
could return the same one; `free_ports` picks all a caller needs at once, and `avoid` names
those picked before.

One rule for the two places that start such processes: `qctl dev` (its hubs and etcd) and the
throwaway etcd the hub's tests start (`hub.store.localetcd`). It imports no component, so both
may import it.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

__all__ = ["EPHEMERAL_PORTS_FILE", "LOWEST_PICKED_PORT", "NoFreePortError", "free_ports"]

EPHEMERAL_PORTS_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10000
"""Below it are the well-known and registered services a developer may be running."""

_TRIES = 200


class NoFreePortError(RuntimeError):
    """Not enough free loopback ports outside the ephemeral range (and not avoided)."""


def free_ports(count: int, *, preferred: int = 0, avoid: Collection[int] = ()) -> list[int]:
    """`count` distinct free loopback ports outside the kernel's ephemeral range and not in
    `avoid`; the first is `preferred` when that one is free and not avoided."""
    picked: list[int] = []
    if preferred and preferred not in avoid and _bindable(preferred):
        picked.append(preferred)
    ephemeral = _ephemeral_ports()
    outside = [
        *range(LOWEST_PICKED_PORT, max(LOWEST_PICKED_PORT, ephemeral.start)),
        *range(max(LOWEST_PICKED_PORT, ephemeral.stop), 65536),
    ]
    # Not the global generator, which tests may seed alike in parallel workers.
    candidates = random.SystemRandom().sample(outside, min(len(outside), _TRIES + count))
    for port in candidates:
        if len(picked) == count:
            break
        if port not in avoid and port not in picked and _bindable(port):
            picked.append(port)
    if len(picked) < count:
        raise NoFreePortError(f"no {count} free ports on 127.0.0.1 outside the ephemeral range")
    return picked


def _ephemeral_ports() -> range:
    """The ports the kernel hands out for bind(port 0) and for outgoing connections."""
    try:
        low, high = (int(part) for part in EPHEMERAL_PORTS_FILE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
