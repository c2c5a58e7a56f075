"""The ports chosen for a process to bind later lie outside the kernel's ephemeral range, so
that no listener bound to port 0 nor outgoing connection takes one before it is bound (or
while its process is restarted on it). One rule, two pickers the layer rules keep apart:
`qctl dev`'s (its hubs and etcd) and the throwaway etcd's (`hub.store.localetcd`, which the
hub's tests start); both are held to it here."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from hub.store import localetcd
from qctl.commands import dev

PICKERS: dict[str, tuple[ModuleType, Callable[[], int]]] = {
    "qctl dev": (dev, dev.free_port),
    "localetcd": (localetcd, lambda: localetcd._free_ports(1)[0]),
}


def _ephemeral() -> range:
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


@pytest.mark.parametrize("picker", PICKERS)
def test_a_picked_port_is_free_and_outside_the_ephemeral_range(picker: str) -> None:
    module, pick = PICKERS[picker]
    for _ in range(20):
        port = pick()
        assert port not in _ephemeral()
        assert port >= module.LOWEST_PICKED_PORT
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("picker", PICKERS)
def test_the_range_is_read_from_the_kernel_and_the_ports_above_it_are_used_when_below_is_none(
    picker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, pick = PICKERS[picker]
    settings = tmp_path / "ip_local_port_range"
    settings.write_text("1024\t60999\n")
    monkeypatch.setattr(module, "EPHEMERAL_PORTS_FILE", settings)
    assert all(pick() >= 61000 for _ in range(20))


@pytest.mark.parametrize("picker", PICKERS)
def test_without_the_kernel_setting_linux_defaults_are_assumed(
    picker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, pick = PICKERS[picker]
    monkeypatch.setattr(module, "EPHEMERAL_PORTS_FILE", tmp_path / "absent")
    assert all(pick() not in range(32768, 61000) for _ in range(20))


def test_the_throwaway_etcd_picks_distinct_ports_at_once() -> None:
    for _ in range(10):
        ports = localetcd._free_ports(6)
        assert len(set(ports)) == 6
        for port in ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
