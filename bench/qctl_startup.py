"""Benchmark: how long qctl takes to start and finish, against the bare interpreter.

Starts a hub (SQLite, the dev fleet's queues; `DevFederation.start_hub_only`), writes a qctl
context for it as `qctl dev up` does, then times N runs of each command, interleaved (one of
each per round, each round starting with the next command, so a busy moment of the shared
machine hits them all alike):

- `python -c pass` with the interpreter qctl runs on (the ratios' denominator; `python3` on
  PATH may be another interpreter, or a pyenv shell-script shim, so it is not used);
- `qctl --help`, `qctl get workloads`, `qctl submit -f one-job.yaml` (a new file each run),
  all with the context file (JSON, as qctl writes it); `get_env`: `qctl get workloads` given
  the hub by MULTIQ_SERVER and MULTIQ_TOKEN instead, as scripts do; `submit_json`: the same
  job as a JSON manifest, which needs no YAML parser;
- the floor: the interpreter importing what a one-shot command cannot do without — argparse,
  json and socket (`floor`), and yaml for a YAML manifest (`floor_yaml`); and, for
  comparison, the same with http.client (which imports ssl and the email parser), what qctl
  used before it wrote its requests on a socket.

    .venv/bin/python -m bench.qctl_startup [--runs 30]

Every command runs as an installed qctl does, with its bytecode cached: the warm-up rounds
write it under a scratch PYTHONPYCACHEPREFIX, whatever PYTHONDONTWRITEBYTECODE says (with it
set, each run would compile qctl's modules again).

Prints one JSON object: median and p90 wall milliseconds of each, and each median's ratio to
the bare interpreter's. With `--instructions` (needs valgrind), also the instructions each
command executes once its bytecode is cached (callgrind's count, in millions) and their
ratio to the bare interpreter's: a figure a busy shared machine does not move, where wall
times on it shrink every ratio towards 1 (each process also waits for a core).
Targets (issue 19): `--help` ≤ 2×, `get` and `submit` ≤ 3×.
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

import yaml

from bench.quantiles import nearest_rank
from qctl import config as qconfig
from qctl.commands.dev import DevFederation

TARGETS = {"help": 2.0, "get": 3.0, "get_env": 3.0, "submit": 3.0, "submit_json": 3.0}
WARMUP_ROUNDS = 3  # the first writes the bytecode cache


def one_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": "default"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sh", "-c", "echo step $RANDOM"],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                }
            }
        },
    }


def commands(qctl: str) -> dict[str, list[str]]:
    """What to time, by name; `{job}` stands for this round's job file (`{job_json}`: the
    same as JSON), `env:` prefixes a command run with the hub in MULTIQ_SERVER/MULTIQ_TOKEN
    instead of the context file."""
    floor = "import argparse, json, socket"
    return {
        "bare": [sys.executable, "-c", "pass"],
        "floor": [sys.executable, "-c", floor],
        "floor_yaml": [sys.executable, "-c", f"{floor}, yaml"],
        "floor_http_client": [sys.executable, "-c", "import argparse, json, http.client"],
        "help": [qctl, "--help"],
        "get": [qctl, "get", "workloads"],
        "get_env": ["env:", qctl, "get", "workloads"],
        "submit": [qctl, "submit", "-f", "{job}"],
        "submit_json": [qctl, "submit", "-f", "{job_json}"],
    }


def concrete(
    argv: list[str], env: dict[str, str], job: Path, fed: DevFederation
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run of a command of `commands`."""
    if argv[0] == "env:":
        argv = argv[1:]
        env = {**env, "MULTIQ_CONFIG": str(job.parent / "none.yaml"), "MULTIQ_SERVER": fed.url}
        env["MULTIQ_TOKEN"] = fed.admin_token
    files = {"{job}": str(job), "{job_json}": str(job.with_suffix(".json"))}
    return [files.get(a, a) for a in argv], env


def run_once(argv: list[str], env: dict[str, str], job: Path, fed: DevFederation) -> float:
    argv, env = concrete(argv, env, job, fed)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def instructions(argv: list[str], env: dict[str, str]) -> float:
    """Millions of instructions the command executes (valgrind's callgrind)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1]) / 1e6
    raise RuntimeError(f"callgrind counted nothing for {' '.join(argv)}: {done.stderr[-500:]}")


def count_instructions(
    workdir: Path, fed: DevFederation, env: dict[str, str], measured: dict[str, list[str]]
) -> dict[str, Any]:
    job = workdir / "job-counted.yaml"
    job.write_text(yaml.safe_dump(one_job("counted")))
    job.with_suffix(".json").write_text(json.dumps(one_job("counted-json")))
    counts = {name: instructions(*concrete(argv, env, job, fed)) for name, argv in measured.items()}
    result: dict[str, Any] = {}
    for name, count in counts.items():
        ratio = count / counts["bare"]
        result[name] = {"instructions_m": round(count, 1), "ratio": round(ratio, 2)}
        if name in TARGETS:
            result[name]["met"] = ratio <= TARGETS[name]
    return result


def measure(workdir: Path, fed: DevFederation, runs: int, *, count: bool = False) -> dict[str, Any]:
    context_file = workdir / "qctl-config.yaml"
    config = qconfig.ConfigFile()
    config.upsert(qconfig.Context(name="bench", server=fed.url, token=fed.admin_token))
    qconfig.save(config, context_file)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MULTIQ_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["MULTIQ_CONFIG"] = str(context_file)
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    qctl = str(Path(sys.executable).parent / "qctl")
    measured = commands(qctl)
    samples: dict[str, list[float]] = {name: [] for name in measured}
    for round_ in range(WARMUP_ROUNDS + runs):
        job = workdir / f"job-{round_}.yaml"
        job.write_text(yaml.safe_dump(one_job(f"sweep-{round_}")))
        job.with_suffix(".json").write_text(json.dumps(one_job(f"sweep-json-{round_}")))
        # Each round starts with the next command: whatever the hub still does after a
        # submit must not always land on the same one.
        names = list(measured)
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            elapsed = run_once(measured[name], env, job, fed)
            if round_ >= WARMUP_ROUNDS:
                samples[name].append(elapsed)
    bare = statistics.median(samples["bare"])
    result: dict[str, Any] = {}
    for name, times in samples.items():
        ordered = sorted(times)
        median = statistics.median(ordered)
        result[name] = {
            "median_ms": round(median * 1000, 1),
            "p90_ms": round(nearest_rank(ordered, 0.9) * 1000, 1),
            "ratio_to_bare": round(median / bare, 2),
        }
        if name in TARGETS:
            result[name]["target_ratio"] = TARGETS[name]
            result[name]["met"] = median / bare <= TARGETS[name]
    if count:
        return {"wall": result, "instructions": count_instructions(workdir, fed, env, measured)}
    return {"wall": result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each command")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each command's instructions with valgrind (a few minutes)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-qctl-startup-") as scratch:
        workdir = Path(scratch)
        fed = DevFederation(workdir / "hub", clusters=1, port=0)
        try:
            fed.start_hub_only()
            measured = measure(workdir, fed, args.runs, count=args.instructions)
        finally:
            fed.stop()
    result = {
        "benchmark": "qctl_startup",
        "runs": args.runs,
        "interpreter": sys.executable,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "commands": measured["wall"],
    }
    if "instructions" in measured:
        result["instructions"] = measured["instructions"]
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
