"""The federation profiler's parts: the window it takes by default, how it finds the bench's
processes and the hub's store, what it counts in that store, the profilers' commands, and the
arguments it refuses before it starts anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.federation_profile import (
    Process,
    ProfileError,
    children,
    default_window,
    main,
    profiler_argv,
    role_process,
    store_path,
    stored_workloads,
)
from hub.store.sqlite import SqliteStore


def test_the_default_window_is_the_middle_four_fifths_of_the_paced_phase() -> None:
    assert default_window(2000, 1000) == (2100, 2900)
    assert default_window(500, 3000) == (800, 3200)


def _fake_process(proc: Path, pid: int, name: str, parent: int, argv: list[str]) -> None:
    entry = proc / str(pid)
    entry.mkdir()
    # The command's name may hold spaces and parentheses; the parent is the field after
    # the state that follows its closing parenthesis.
    (entry / "stat").write_text(f"{pid} ({name}) S {parent} {pid} {pid} 0 -1\n")
    (entry / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_the_children_of_a_process_are_found_in_proc_with_their_command_lines(
    tmp_path: Path,
) -> None:
    _fake_process(tmp_path, 11, "python", 10, ["python", "/v/bin/multiq-hub", "--port", "1"])
    _fake_process(tmp_path, 12, "odd (name) here", 10, ["python", "/v/bin/multiq-agent"])
    _fake_process(tmp_path, 13, "python", 99, ["python", "/v/bin/multiq-agent"])
    (tmp_path / "self").mkdir()
    found = children(10, tmp_path)
    assert [p.pid for p in found] == [11, 12]
    assert found[0].argv == ("python", "/v/bin/multiq-hub", "--port", "1")


def test_the_real_children_of_this_process_are_found() -> None:
    child = subprocess.Popen(["sleep", "5"])
    try:
        assert Process(child.pid, ("sleep", "5")) in children(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_a_role_is_the_process_running_its_console_script() -> None:
    hub = Process(1, ("/v/bin/python", "/v/bin/multiq-hub", "--store", "sqlite:/x/hub.db"))
    agent = Process(2, ("/v/bin/python", "/v/bin/multiq-agent", "--hub", "http://h"))
    kubesim = Process(3, ("/v/bin/python", "/v/bin/kubesim", "up"))
    assert role_process([kubesim, hub, agent], "agent") == agent
    assert role_process([kubesim, hub, agent], "hub") == hub
    assert role_process([kubesim], "hub") is None


def test_the_hubs_store_is_read_from_its_command_line() -> None:
    spaced = Process(1, ("python", "multiq-hub", "--store", "sqlite:/x/hub.db", "--port", "1"))
    joined = Process(1, ("python", "multiq-hub", "--store=sqlite:/y/hub.db"))
    assert store_path(spaced) == Path("/x/hub.db")
    assert store_path(joined) == Path("/y/hub.db")
    with pytest.raises(ProfileError, match="SQLite"):
        store_path(Process(1, ("python", "multiq-hub", "--store", "etcd://127.0.0.1:2379")))


async def test_only_workloads_are_counted_in_the_hubs_store(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    assert stored_workloads(db) == 0  # not made yet
    store = await SqliteStore.open(db)
    try:
        for name in ("a", "b", "c"):
            await store.create(f"/workloads/default/{name}", {"metadata": {"name": name}})
        await store.create("/workloadsources/default/a", {"kind": "Job"})
        await store.create("/clusterqueues/cq", {"metadata": {"name": "cq"}})
        assert stored_workloads(db) == 3
    finally:
        await store.close()


def test_the_profilers_commands_name_the_process_and_the_output(tmp_path: Path) -> None:
    perf = profiler_argv("perf", 42, tmp_path / "p.data", native=False)
    assert perf[:2] == ["perf", "record"]
    assert perf[-4:] == ["-p", "42", "-o", str(tmp_path / "p.data")]
    spy = profiler_argv("py-spy", 42, tmp_path / "p.raw", native=True)
    assert Path(spy[0]).name == "py-spy"
    assert {"--gil", "--native"} <= set(spy)
    assert spy[spy.index("-p") + 1] == "42"
    assert "--native" not in profiler_argv("py-spy", 42, tmp_path / "p.raw", native=False)


def test_a_window_outside_the_paced_phase_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--role", "hub", "--from", "100", "--to", "900"]) == 1
    assert "must lie in the paced phase" in capsys.readouterr().err


def test_from_without_to_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--role", "hub", "--from", "2100"])
    assert exited.value.code == 2
