"""A failed end-to-end test shows the last lines of its federation's logs in its report (the
temporary directory that holds them is gone by the time a CI failure is read)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from e2e.conftest import log_tails, pytest_runtest_makereport
from qctl.commands.dev import DevFederation


def _fed_with_logs(tmp_path: Path, logs: dict[str, str]) -> DevFederation:
    fed = DevFederation(tmp_path / "fed", clusters=1, port=0)
    folder = fed.state_dir / "logs"
    folder.mkdir(parents=True)
    for name, text in logs.items():
        (folder / name).write_text(text)
    return fed


def _report_of(item: Any, when: str, *, failed: bool) -> Any:
    report = SimpleNamespace(when=when, failed=failed, sections=[])
    hook = pytest_runtest_makereport(item, SimpleNamespace())  # type: ignore[arg-type]
    next(hook)
    try:
        hook.send(report)  # type: ignore[arg-type]
    except StopIteration as done:
        assert done.value is report
    return report


def test_each_log_shows_its_last_lines_under_its_name(tmp_path: Path) -> None:
    lines = "".join(f"line {i}\n" for i in range(100))
    fed = _fed_with_logs(tmp_path, {"hub.log": lines, "agent-sim-0.log": "up\n"})
    tails = log_tails(fed.state_dir / "logs", lines=2)
    assert (
        tails
        == "--- agent-sim-0.log (last 1 lines)\nup\n--- hub.log (last 2 lines)\nline 98\nline 99"
    )
    assert log_tails(tmp_path / "none") == f"(no logs in {tmp_path / 'none'})"


def test_only_a_failed_call_with_a_federation_carries_its_logs(tmp_path: Path) -> None:
    fed = _fed_with_logs(tmp_path, {"hub.log": "placed\n"})
    with_fed = SimpleNamespace(funcargs={"federation": fed})
    failed = _report_of(with_fed, "call", failed=True)
    assert failed.sections == [("federation logs", "--- hub.log (last 1 lines)\nplaced")]
    assert _report_of(with_fed, "call", failed=False).sections == []
    assert _report_of(with_fed, "teardown", failed=True).sections == []
    assert _report_of(SimpleNamespace(funcargs={}), "call", failed=True).sections == []
