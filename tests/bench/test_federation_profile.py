"""The federation profiler: which process a role is, the profilers' commands, a profiler
stopped at the phase's end (and one that fails said so), the arguments refused, and a small
federation profiled with perf over its paced phase."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.federation_profile import (
    ProfileError,
    Profiler,
    main,
    profiler_argv,
    role_process,
)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "30"])


def test_a_role_is_the_hub_or_the_first_agent() -> None:
    kubesim, hub, first, second = (_sleeper() for _ in range(4))
    try:
        processes = [("kubesim", kubesim), ("hub", hub), ("agent-a", first), ("agent-b", second)]
        assert role_process(processes, "hub") is hub
        assert role_process(processes, "agent") is first
        with pytest.raises(ProfileError, match="no agent"):
            role_process([("kubesim", kubesim), ("hub", hub)], "agent")
    finally:
        for proc in (kubesim, hub, first, second):
            proc.kill()
            proc.wait()


def test_the_profilers_commands_name_the_process_and_the_output(tmp_path: Path) -> None:
    perf = profiler_argv("perf", 42, tmp_path / "p.data", native=False)
    assert perf[:2] == ["perf", "record"]
    assert perf[-4:] == ["-p", "42", "-o", str(tmp_path / "p.data")]
    spy = profiler_argv("py-spy", 42, tmp_path / "p.raw", native=True)
    assert Path(spy[0]).name == "py-spy"
    assert {"--gil", "--native"} <= set(spy)
    assert spy[spy.index("-p") + 1] == "42"
    assert "--native" not in profiler_argv("py-spy", 42, tmp_path / "p.raw", native=False)


def test_a_profiler_is_stopped_by_sigint_and_leaves_its_output(tmp_path: Path) -> None:
    out, ready = tmp_path / "profile.raw", tmp_path / "ready"
    # A stand-in profiler: it writes its output when interrupted, as perf and py-spy do.
    script = (
        "import pathlib, signal, sys, time\n"
        "def done(*_):\n"
        f"    pathlib.Path({str(out)!r}).write_text('main 1\\n'); sys.exit(0)\n"
        "signal.signal(signal.SIGINT, done)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(30)\n"
    )
    profiler = Profiler([sys.executable, "-c", script], out)
    profiler.start()
    deadline = time.monotonic() + 20
    while not ready.exists():  # (interrupted before its handler is set, it would just die)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    profiler.stop()
    assert out.read_text() == "main 1\n"


def test_a_profiler_that_writes_nothing_is_an_error(tmp_path: Path) -> None:
    profiler = Profiler(["sleep", "30"], tmp_path / "never.data")
    profiler.start()
    with pytest.raises(ProfileError, match="sleep failed"):
        profiler.stop()


def test_a_profiler_that_cannot_run_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot run"):
        Profiler([str(tmp_path / "no-such-profiler")], tmp_path / "p.data").start()


def test_a_phase_without_workloads_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--role", "hub", "--paced", "0"])
    assert exited.value.code == 2


@pytest.mark.slow
@pytest.mark.e2e
def test_a_small_federations_hub_is_profiled_with_perf_over_its_paced_phase(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "--role", "hub", "--out", str(tmp_path / "hub"),
                "--workloads", "20", "--paced", "40", "--rate", "100", "--nodes", "4",
            ]
        )  # fmt: skip
    assert code == 0
    result = json.loads(out.getvalue())
    assert result["role"] == "hub" and result["phase"]["name"] == "paced"
    assert result["phase"]["workloads"] == 40
    assert result["phase"]["cpu_ms_per_workload"]["hub"] > 0
    data = Path(result["output"])
    assert data == tmp_path / "hub.data"
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--sort", "dso"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "libpython" in report.stdout
