"""Benchmark: what expanding a profile costs the hub (hub.templates, pure), per object.

- `job_us`: a Job mode request (`--cmd`, `--request`) on examples/profile.yaml's GPU profile
  (three volumes, two variables);
- `slurm_task_us`: building one Slurm task's Job alone (api.slurm.work.build_job), and
  `slurm_task_with_profile_us`: building it and dressing it in the profile's Slurm mode, as
  `qctl sbatch --profile` does for every task of an array — their difference is what a profile
  adds per task to the Slurm mode's throughput (bench.slurm_mode_throughput).

    .venv/bin/python -m bench.template_expansion [--count 2000] [--repeats 5]

Prints one JSON object: the median over the repeats of each mean, in microseconds, and the
machine's load average (the machine is shared: compare figures of one run). No target is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from api.codec import decode
from api.documents import load_documents
from api.kinds import REGISTRY
from api.meta import Object
from api.slurm.environment import BatchContext
from api.slurm.ids import TaskIds
from api.slurm.options import parse_sbatch
from api.slurm.work import build_job
from api.v1alpha1.templates import JobRequest
from hub.templates import JobOverrides, SlurmTask, expand, resolve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "profile.yaml"


def _mean_us(step: Callable[[int], object], count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        step(i)
    return (time.perf_counter() - start) / count * 1e6


def measure(count: int, repeats: int) -> dict[str, float | list[float]]:
    objects = [decode(d.body, REGISTRY) for d in load_documents(EXAMPLE.read_text())]

    def find(kind: type[Object], name: str, namespace: str) -> Object | None:
        return next(
            (
                o
                for o in objects
                if isinstance(o, kind)
                and o.metadata.name == name
                and o.metadata.namespace == namespace
            ),
            None,
        )

    job_mode = resolve(find, "vision", "gpu-research", "Job")
    slurm_mode = resolve(find, "vision", "gpu-research", "Slurm")
    request = JobRequest(mode="Job", cmd=["python", "train.py"], requests={"cpu": "2"})
    options, args = parse_sbatch(["-p", "vision", "--wrap", "true"], None, {})
    context = BatchContext(
        job_name="wrap", partition="vision", user="alice", uid=1000, gid=1000,
        submit_host="laptop", submit_dir="/home/alice", nice=0, controller="hub:8470",
        submitter_environment={},
    )  # fmt: skip
    script = "#!/bin/sh\ntrue\n"

    def job(_: int) -> object:
        overrides = JobOverrides(request, "alice", "abcde")
        return expand(job_mode.profile, job_mode.template, job_mode.bundles, "Job", overrides)

    def task(i: int) -> dict[str, object]:
        return build_job(
            options, script, args, TaskIds(i + 1), context, namespace="vision", queue="vision"
        )

    def task_with_profile(i: int) -> object:
        task_job = SlurmTask(task(i), "alice", options.given)
        p = slurm_mode
        return expand(p.profile, p.template, p.bundles, "Slurm", task_job)

    results: dict[str, list[float]] = {"job_us": [], "slurm_task_us": [], "with_profile": []}
    for _ in range(repeats):
        results["job_us"].append(_mean_us(job, count))
        results["slurm_task_us"].append(_mean_us(task, count))
        results["with_profile"].append(_mean_us(task_with_profile, count))
    return {
        "job_us": round(statistics.median(results["job_us"]), 1),
        "slurm_task_us": round(statistics.median(results["slurm_task_us"]), 1),
        "slurm_task_with_profile_us": round(statistics.median(results["with_profile"]), 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.count, args.repeats)))


if __name__ == "__main__":
    main()
