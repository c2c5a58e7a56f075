"""The ports picked for a process to bind later (`localports`, used by `qctl dev` for its hubs
and etcd, and by the hub's throwaway etcd) lie outside the kernel's ephemeral range, so that no
listener bound to port 0 nor outgoing connection takes one before it is bound (or while its
process is restarted on it); the ports picked together, or picked before, are never picked
again."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import localports
from localports import LOWEST_PICKED_PORT, NoFreePortError, free_ports


def _ephemeral() -> range:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def _pick() -> int:
    return free_ports(1)[0]


def test_a_picked_port_is_free_and_outside_the_ephemeral_range() -> None:
    for _ in range(20):
        port = _pick()
        assert port not in _ephemeral()
        assert port >= LOWEST_PICKED_PORT
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_the_range_is_read_from_the_kernel_and_the_ports_above_it_are_used_when_below_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "ip_local_port_range"
    settings.write_text("1024\t60999\n")
    monkeypatch.setattr(localports, "EPHEMERAL_PORTS_FILE", settings)
    assert all(_pick() >= 61000 for _ in range(20))


def test_without_the_kernel_setting_linux_defaults_are_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localports, "EPHEMERAL_PORTS_FILE", tmp_path / "absent")
    assert all(_pick() not in range(32768, 61000) for _ in range(20))


def test_ports_picked_at_once_are_distinct_and_free() -> None:
    for _ in range(10):
        ports = free_ports(6)
        assert len(set(ports)) == 6
        for port in ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))


def test_the_preferred_port_comes_first_when_it_is_free_and_not_avoided() -> None:
    port = _pick()
    assert free_ports(2, preferred=port)[0] == port
    assert port not in free_ports(2, preferred=port, avoid={port})


@pytest.mark.usefixtures("two_ports_outside_the_range")
def test_ports_picked_before_are_not_picked_again() -> None:
    # Without `avoid`, a second pick would often be the first again.
    for _ in range(20):
        first = _pick()
        assert free_ports(1, avoid={first}) != [first]
        assert sorted(free_ports(2)) == [65534, 65535]


@pytest.mark.usefixtures("two_ports_outside_the_range")
def test_with_too_few_free_ports_left_there_is_a_clear_error() -> None:
    with pytest.raises(NoFreePortError, match="no 1 free ports"):
        free_ports(1, avoid={65534, 65535})
    with pytest.raises(NoFreePortError, match="no 3 free ports"):
        free_ports(3)
