"""The throwaway etcd picks its members' ports outside the kernel's ephemeral range: a member
restarted on its ports finds them free, because no listener bound to port 0 and no outgoing
connection can have taken one meanwhile."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hub.store import localetcd


def _ephemeral() -> range:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_picked_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    for _ in range(10):
        ports = localetcd._free_ports(6)
        assert len(set(ports)) == 6
        for port in ports:
            assert port not in _ephemeral()
            assert port >= localetcd.LOWEST_PICKED_PORT
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))


def test_the_range_is_read_from_the_kernel_and_the_ports_above_it_are_used_when_below_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "ip_local_port_range"
    settings.write_text("1024\t60999\n")
    monkeypatch.setattr(localetcd, "EPHEMERAL_PORTS_FILE", settings)
    assert all(port >= 61000 for port in localetcd._free_ports(20))


def test_without_the_kernel_setting_linux_defaults_are_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localetcd, "EPHEMERAL_PORTS_FILE", tmp_path / "absent")
    assert all(port not in range(32768, 61000) for port in localetcd._free_ports(20))
