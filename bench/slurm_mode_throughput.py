"""Benchmark: MultiQ's Slurm mode end to end, as issue 19 asks — 1,000 tasks submitted as one
`qctl sbatch --array=0-999 --wrap true`, and 300 `qctl sbatch --wrap true` calls in a shell-like
loop, through a `qctl dev up` federation (two kubesim clusters of one 8-CPU node each: 16
one-CPU slots, process runtime: every task really runs `true`).

For each: the submission time (the qctl processes, one after the other), and the time from the
first submission until every task is COMPLETED at the hub (polled through the Slurm listing
route every 0.2 s). jobs/s = tasks / that time. Real Slurm 22.05 on this machine finished 300
such jobs at 18.2 jobs/s at best (shared/reference/slurm.md); the targets are the array at ≥ 5×
that and the loop no slower than it. What the federation's processes spend per array task
(`cpu_ms_per_task`) says where the two cores run out (`cpu_bound_jobs_per_second`,
`array_vs_cpu_bound`); `floor` times one `qctl sbatch` against the bare interpreter and
against a minimal one-request client written with the standard library (`http.client`).

    .venv/bin/python -m bench.slurm_mode_throughput [--array 1000] [--loop 300]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from qctl.commands.dev import DevFederation
from qctl.rest import HubSession

REAL_SLURM_JOBS_PER_SECOND = 18.2
QCTL = str(Path(sys.executable).parent / "qctl")
SLURM = "/apis/slurm.multiq.dev/v1alpha1"


def _env(fed: DevFederation) -> dict[str, str]:
    # qctl runs as an installed qctl does, with its bytecode cached (the first run writes it
    # under a scratch prefix): with PYTHONDONTWRITEBYTECODE set, as on the shared machine,
    # every run would compile qctl's modules again (bench.qctl_startup does the same).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {
        "MULTIQ_SERVER": fed.url,
        "MULTIQ_TOKEN": fed.admin_token,
        "MULTIQ_CONFIG": str(fed.state_dir / "qctl-config.yaml"),
        "PYTHONPYCACHEPREFIX": str(fed.state_dir / "pycache"),
    }


def _sbatch(fed: DevFederation, *argv: str) -> str:
    out = subprocess.run(
        [QCTL, "sbatch", "--parsable", *argv],
        env=_env(fed),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip()


def _rows(hub: HubSession, jobs: list[str], **params: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = hub.request(
        "GET",
        f"{SLURM}/namespaces/default/jobs",
        params={"jobs": ",".join(jobs), "history": "true", **params},
    )["items"]
    return rows


def _wait(hub: HubSession, jobs: list[str], tasks: int, timeout: float) -> float:
    """When every task has COMPLETED. Each poll asks only for the tasks not ended yet, which
    is all the hub builds rows for: a poll of the whole array (1,000 rows, about 0.1 s of
    the hub's time every 0.2 s) would have been a good part of what it measures."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _rows(hub, jobs, states="PENDING,RUNNING"):
            ended = time.monotonic()
            rows = _rows(hub, jobs)
            failed = [r["jobId"] for r in rows if r["state"] != "COMPLETED"]
            if failed:
                raise RuntimeError(f"tasks ended otherwise than COMPLETED: {failed[:5]}")
            if len(rows) == tasks:
                return ended
        time.sleep(0.2)
    raise RuntimeError(f"not every task completed within {timeout:.0f}s")


# A minimal one-shot client written with the standard library: the interpreter, http.client
# and json, and one round trip to the hub (a listing of one job), for comparison with qctl.
_FLOOR_PROGRAM = """
import argparse, json, os, http.client
server = os.environ["MULTIQ_SERVER"].removeprefix("http://")
connection = http.client.HTTPConnection(server)
token = os.environ["MULTIQ_TOKEN"]
path = "/apis/slurm.multiq.dev/v1alpha1/namespaces/default/jobs?jobs=1"
connection.request("GET", path, headers={"Authorization": "Bearer " + token})
reply = connection.getresponse()
reply.read()
assert reply.status == 200, reply.status
"""
FLOOR_RUNS = 15


def _floor(fed: DevFederation) -> dict[str, Any]:
    """Median wall milliseconds of the bare interpreter, of the minimal client and of one
    `qctl sbatch` (held, then cancelled), interleaved so a busy moment hits them alike."""
    env = _env(fed)
    commands = {
        "python_pass": [sys.executable, "-c", "pass"],
        "one_request": [sys.executable, "-c", _FLOOR_PROGRAM],
        "qctl_sbatch": [QCTL, "sbatch", "--parsable", "--hold", "--wrap", "true"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    held: list[str] = []
    for round_ in range(FLOOR_RUNS + 1):  # the first round writes the bytecode cache
        for name, argv in commands.items():
            started = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            if round_:
                samples[name].append(time.perf_counter() - started)
            if name == "qctl_sbatch":
                held.append(done.stdout.strip())
    subprocess.run([QCTL, "scancel", *held], env=env, capture_output=True, check=True, timeout=60)
    medians = {name: statistics.median(times) * 1000 for name, times in samples.items()}
    out: dict[str, Any] = {f"{name}_ms": round(ms, 1) for name, ms in medians.items()}
    out["qctl_sbatch_vs_one_request"] = round(medians["qctl_sbatch"] / medians["one_request"], 2)
    return out


def _cpu_seconds(fed: DevFederation) -> dict[str, float]:
    """CPU time so far of each process of the federation, with its reaped children's (the
    process runtime's pods: every task's `true`)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for name, proc in fed.processes:
        with open(f"/proc/{proc.pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        # utime, stime, cutime, cstime (proc(5) fields 14-17; `fields` starts at field 3)
        used[name] = sum(int(f) for f in fields[11:15]) / ticks
    return used


def measure(fed: DevFederation, *, array: int, loop: int) -> dict[str, Any]:
    hub = HubSession(fed.context)
    results: dict[str, Any] = {"floor": _floor(fed)}
    cpu_before = _cpu_seconds(fed)
    start = time.monotonic()
    array_id = _sbatch(fed, f"--array=0-{array - 1}", "--wrap", "true")
    submitted = time.monotonic()
    ended = _wait(hub, [array_id], array, timeout=600)
    cpu_after = _cpu_seconds(fed)
    per_task = {
        name: round((cpu_after[name] - cpu_before[name]) * 1000 / array, 1) for name in cpu_after
    }
    cores = os.cpu_count() or 1
    results["array"] = {
        "tasks": array,
        "submit_seconds": round(submitted - start, 3),
        "total_seconds": round(ended - start, 3),
        "jobs_per_second": round(array / (ended - start), 1),
        "vs_real_slurm": round(array / (ended - start) / REAL_SLURM_JOBS_PER_SECOND, 2),
        # What the federation's processes spent per task, and the rate at which this
        # machine's cores, all given to it, would run out.
        "cpu_ms_per_task": per_task,
        "cpu_bound_jobs_per_second": round(cores * 1000 / sum(per_task.values()), 1),
    }
    start = time.monotonic()
    ids = [_sbatch(fed, "--wrap", "true") for _ in range(loop)]
    submitted = time.monotonic()
    ended = _wait(hub, ids, loop, timeout=600)
    results["loop"] = {
        "jobs": loop,
        "submit_seconds": round(submitted - start, 3),
        "submit_jobs_per_second": round(loop / (submitted - start), 1),
        "total_seconds": round(ended - start, 3),
        "jobs_per_second": round(loop / (ended - start), 1),
        "vs_real_slurm": round(loop / (ended - start) / REAL_SLURM_JOBS_PER_SECOND, 2),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--array", type=int, default=1000)
    parser.add_argument("--loop", type=int, default=300)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="multiq-slurm-bench-") as tmp:
        fed = DevFederation(Path(tmp) / "fed", clusters=2, nodes=1, runtime="process", port=0)
        try:
            fed.start(detach=False)
            results = measure(fed, array=args.array, loop=args.loop)
        finally:
            fed.stop()
    results["real_slurm_jobs_per_second"] = REAL_SLURM_JOBS_PER_SECOND
    results["targets"] = {"array_vs_real_slurm": 5.0, "loop_vs_real_slurm": 1.0}
    results["array_vs_cpu_bound"] = round(
        results["array"]["jobs_per_second"] / results["array"]["cpu_bound_jobs_per_second"], 2
    )
    results["load_average"] = {
        "before": [round(x, 2) for x in load_before],
        "after": [round(x, 2) for x in os.getloadavg()],
    }
    results["cpu_slots"] = 16
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
