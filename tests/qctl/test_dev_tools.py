"""`qctl dev` finds the commands it starts (kubesim, multiq-hub, multiq-agent) beside itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from qctl.commands.dev import _tool


def test_a_directory_named_like_a_tool_beside_argv0_is_not_taken_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in a pytest-xdist worker (`python -c`): argv[0] is "-c", resolved in the working
    # directory, where the `kubesim` package is a directory.
    (tmp_path / "kubesim").mkdir()
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "-c")])
    found = Path(_tool("kubesim"))
    assert found == Path(sys.executable).parent / "kubesim"
    assert found.is_file()


def test_a_tool_beside_argv0_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "kubesim"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "qctl")])
    assert _tool("kubesim") == str(script)
