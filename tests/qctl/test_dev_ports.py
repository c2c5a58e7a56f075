"""`qctl dev` keeps the port asked for when it is free, and otherwise picks one outside the
kernel's ephemeral range, never one it picked for a process not started yet (the rule itself,
shared with the hub's throwaway etcd, is held in tests/test_localports.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from qctl.commands.dev import free_port
from qctl.errors import QctlError


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


@pytest.mark.usefixtures("two_ports_outside_the_range")
def test_ports_picked_for_processes_not_started_yet_are_not_picked_again() -> None:
    # Without `avoid`, the second of two picks in a row would often be the first again.
    for _ in range(20):
        first = free_port()
        assert free_port(avoid={first}) != first
        assert free_port(first, avoid={first}) != first


@pytest.mark.usefixtures("two_ports_outside_the_range")
def test_with_every_free_port_already_picked_there_is_a_clear_error() -> None:
    with pytest.raises(QctlError, match="no 1 free ports"):
        free_port(avoid={65534, 65535})
