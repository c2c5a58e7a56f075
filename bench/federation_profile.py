"""Benchmark tool: a sampling profile of one federation process, over a window of
`bench.federation_dispatch`'s traffic that leaves out start-up and exit.

Why (issue #15): a profile taken over a process's whole life, or over a fixed span of
seconds, mixes into the figures what the bench does not count. The bench reads each
process's CPU from /proc at the edges of its phases; a profiler attached at start or left
running to the end also sees the imports and schemas of start-up and, at exit, the
interpreter's last collections over the whole heap — in session 41 those were 14 % of
multiq-hub's `py-spy --gil` samples over a run (`gc_collect_main` with no Python frame), and
30 % of its `perf record` samples in a window that ran past the bench's end. This tool runs
the bench as it is, finds the process, and profiles it only while the number of workloads in
the hub's store goes from `--from` to `--to` (read from the hub's SQLite file by a read-only
connection, so the hub does no work for it: polling its /metrics instead cost it a few
per cent in the window).

    .venv/bin/python -m bench.federation_profile --role hub|agent [--profiler perf|py-spy]
        [--from N] [--to N] [--out PREFIX] [--native] [--workloads 2000] [--paced 1000]

The defaults take the middle four fifths of the paced phase (200 workloads a second). The
bench's own arguments (`--workloads`, `--paced`, `--rate`) are passed on; a longer paced
phase (`--paced 3000`) gives more samples. `--role agent` profiles the first agent.
- `perf`: `perf record -e cpu-clock -g` (every native frame: the interpreter, pydantic-core,
  libc, the kernel) into PREFIX.data; read it with `perf report -i PREFIX.data`.
- `py-spy`: `py-spy record --gil -f raw` (the Python stacks of the thread holding the GIL;
  with `--native`, the C frames too) into PREFIX.raw, one collapsed stack a line. py-spy is
  not one of the project's dependencies: `.venv/bin/pip install py-spy`.

Prints one JSON object: the role, the window (workloads and seconds), the profiler's command
and output file, and the bench's own result. Run by hand; tests/bench/test_federation_profile.py
checks its parts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROFILERS = ("perf", "py-spy")
ROLES = {"hub": "multiq-hub", "agent": "multiq-agent"}
POLL_SECONDS = 0.1
FIND_SECONDS = 120.0
"""How long to wait for the process, and then for each edge of the window."""


class ProfileError(RuntimeError):
    """The bench or the profiler did not do what the window needs; the message says which."""


@dataclass(frozen=True)
class Process:
    pid: int
    argv: tuple[str, ...]


def default_window(workloads: int, paced: int) -> tuple[int, int]:
    """The middle four fifths of the paced phase, in workloads stored: the phase begins once
    the burst's `workloads` are in."""
    return workloads + paced // 10, workloads + paced - paced // 10


def children(parent: int, proc: Path = Path("/proc")) -> list[Process]:
    """The live processes whose parent is `parent`, with their command lines."""
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        # The parent is the second field after the command's name, which is in parentheses
        # and may hold spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == parent:
            out.append(Process(int(entry.name), tuple(a.decode() for a in argv if a)))
    return sorted(out, key=lambda p: p.pid)


def role_process(processes: list[Process], role: str) -> Process | None:
    """The first process running `role`'s console script (`python …/multiq-hub …`)."""
    script = ROLES[role]
    for process in processes:
        if any(Path(arg).name == script for arg in process.argv[:2]):
            return process
    return None


def store_path(hub: Process) -> Path:
    """The hub's SQLite file, from its `--store sqlite:PATH`."""
    argv = list(hub.argv)
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--store" and i + 1 < len(argv) else None
        if arg.startswith("--store="):
            value = arg.split("=", 1)[1]
        if value is not None and value.startswith("sqlite:"):
            return Path(value.removeprefix("sqlite:"))
    raise ProfileError(f"the hub does not run on a SQLite file: {' '.join(argv)}")


def stored_workloads(db: Path) -> int:
    """How many workloads the hub's store holds (0 while its file is not made yet)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM objects WHERE key >= '/workloads/' AND key < '/workloads0'"
            ).fetchone()
    except sqlite3.Error:
        return 0  # (the schema not made yet, or the file busy for a moment)
    return int(count)


def profiler_argv(profiler: str, pid: int, out: Path, *, native: bool) -> list[str]:
    """The profiler's command for `pid`, writing to `out`; it stops on SIGINT."""
    if profiler == "perf":
        perf = ["perf", "record", "-e", "cpu-clock", "-F", "999", "-g"]
        return [*perf, "-p", str(pid), "-o", str(out)]
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    argv = [spy, "record", "-p", str(pid), "-r", "250", "-f", "raw", "--gil", "-o", str(out)]
    return [*argv, "--native"] if native else argv


def _until(check: Any, what: str, bench: subprocess.Popen[str]) -> Any:
    deadline = time.monotonic() + FIND_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if bench.poll() is not None:
            raise ProfileError(f"the bench ended before {what}")
        time.sleep(POLL_SECONDS)
    raise ProfileError(f"no {what} within {FIND_SECONDS:.0f} s")


def profile(args: argparse.Namespace) -> dict[str, Any]:
    first, last = (
        (args.first, args.last)
        if args.first is not None and args.last is not None
        else default_window(args.workloads, args.paced)
    )
    if not args.workloads < first < last <= args.workloads + args.paced:
        raise ProfileError(
            f"--from {first} --to {last}: the window must lie in the paced phase "
            f"({args.workloads} to {args.workloads + args.paced} workloads stored)"
        )
    bench_argv = [
        sys.executable, "-m", "bench.federation_dispatch",
        "--workloads", str(args.workloads), "--paced", str(args.paced), "--rate", str(args.rate),
    ]  # fmt: skip
    out = Path(args.out).with_suffix(".data" if args.profiler == "perf" else ".raw")
    with tempfile.TemporaryFile("w+") as printed:
        bench = subprocess.Popen(bench_argv, stdout=printed, text=True)
        try:
            hub = _until(lambda: role_process(children(bench.pid), "hub"), "hub", bench)
            target = _until(lambda: role_process(children(bench.pid), args.role), args.role, bench)
            db = store_path(hub)
            _until(lambda: stored_workloads(db) >= first, f"{first} workloads stored", bench)
            argv = profiler_argv(args.profiler, target.pid, out, native=args.native)
            started = time.monotonic()
            profiler = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                _until(lambda: stored_workloads(db) >= last, f"{last} workloads stored", bench)
            finally:
                profiler.send_signal(signal.SIGINT)
                _, errors = profiler.communicate(timeout=60)
            seconds = time.monotonic() - started
            if profiler.returncode not in (0, -signal.SIGINT) or not out.exists():
                raise ProfileError(f"{argv[0]} failed ({profiler.returncode}): {errors[-800:]!r}")
            if bench.wait() != 0:
                raise ProfileError(f"the bench exited with {bench.returncode}")
        finally:
            if bench.poll() is None:
                bench.terminate()
                bench.wait()
        printed.seek(0)
        result = json.loads(printed.read())
    return {
        "benchmark": "federation_profile",
        "role": args.role,
        "pid": target.pid,
        "window": {"from": first, "to": last, "seconds": round(seconds, 2)},
        "profiler": argv,
        "output": str(out),
        "bench": result,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=sorted(ROLES), required=True)
    parser.add_argument("--profiler", choices=PROFILERS, default="perf")
    parser.add_argument("--from", dest="first", type=int, help="workloads stored at the start")
    parser.add_argument("--to", dest="last", type=int, help="workloads stored at the end")
    parser.add_argument("--out", default="federation-profile", help="output path, no suffix")
    parser.add_argument("--native", action="store_true", help="py-spy: C frames too")
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--paced", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args(argv)
    if (args.first is None) != (args.last is None):
        parser.error("--from and --to go together")
    try:
        result = profile(args)
    except ProfileError as exc:
        print(f"federation_profile: {exc}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
