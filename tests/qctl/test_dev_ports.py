"""`qctl dev` keeps the port asked for when it is free, and otherwise picks one outside the
kernel's ephemeral range (the rule itself, shared with the throwaway etcd, is held in
tests/test_picked_ports.py)."""

from __future__ import annotations

import socket
from pathlib import Path

from qctl.commands.dev import free_port


def _ephemeral() -> range:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_the_preferred_port_is_kept_when_it_is_free() -> None:
    port = free_port()
    assert free_port(port) == port


def test_a_taken_preferred_port_gives_way_to_another_outside_the_ephemeral_range() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = free_port(port)
    assert other != port
    assert other not in _ephemeral()
