"""Fixtures shared across the test folders."""

from __future__ import annotations

from pathlib import Path

import pytest

import localports


@pytest.fixture
def two_ports_outside_the_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`localports` taken to see an ephemeral range ending at 65533: 65534 and 65535 are all
    there is to pick from (for `qctl dev`'s picks too)."""
    settings = tmp_path / "ip_local_port_range"
    settings.write_text("10000\t65533\n")
    monkeypatch.setattr(localports, "EPHEMERAL_PORTS_FILE", settings)
