"""`qctl dev` picks the ports its hubs and etcd will bind outside the kernel's ephemeral range,
so that no listener bound to port 0 nor outgoing connection takes one before it is bound."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from qctl.commands import dev
from qctl.commands.dev import free_port


def _ephemeral() -> range:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_a_picked_port_is_free_and_outside_the_ephemeral_range() -> None:
    for _ in range(20):
        port = free_port()
        assert port not in _ephemeral()
        assert port >= dev.LOWEST_PICKED_PORT
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


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


def test_the_range_is_read_from_the_kernel_and_the_ports_above_it_are_used_when_below_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "ip_local_port_range"
    settings.write_text("1024\t60999\n")
    monkeypatch.setattr(dev, "EPHEMERAL_PORTS_FILE", settings)
    assert all(free_port() >= 61000 for _ in range(20))


def test_without_the_kernel_setting_linux_defaults_are_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dev, "EPHEMERAL_PORTS_FILE", tmp_path / "absent")
    assert all(free_port() not in range(32768, 61000) for _ in range(20))
