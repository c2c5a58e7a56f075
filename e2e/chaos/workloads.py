"""The workloads a chaos run submits: a seeded, mixed stream over the three dispatch modes.

Shapes, each a few seconds to ~20 s long in kubesim's simulated runtime (the pod template's
`kubesim.dev/duration`), with CPU requests of 250m to 2:

- `single`: a batch/v1 Job of one pod;
- `parallel`: a Job of 2–4 pods (parallelism = completions);
- `indexed`: an Indexed Job of 2–4 pods;
- `gang`: a MultiQ JobSet of a leader and 2–3 workers that start together (3–4 pods).

Every workload is admitted whole (the engine reserves quota for all its pods), so each is a
gang to the dispatcher; the JobSet is one across two Jobs. Pure: the same seed gives the same
stream. Called by: e2e.chaos.driver; tests/chaos.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from e2e.chaos.federation import MODES, queue_of

__all__ = ["SHAPES", "PlannedWorkload", "plan_workloads", "witness"]

SHAPES = ("single", "parallel", "indexed", "gang")
CPU_SIZES = ("250m", "500m", "1", "2")
MEMORY = "512Mi"
MODE_WEIGHTS = {"BestFit": 4, "AllAtOnce": 3, "Incremental": 3}
SHAPE_WEIGHTS = {"single": 4, "parallel": 2, "indexed": 2, "gang": 2}


@dataclass(frozen=True)
class PlannedWorkload:
    index: int
    name: str
    """The submitted object's name (the Workload is named `<kind>-<name>`)."""
    mode: str
    shape: str
    pods: int
    cpu: str
    duration: float
    body: dict[str, Any]


def plan_workloads(
    count: int,
    rng: random.Random,
    *,
    durations: tuple[float, float] = (2.0, 8.0),
    long_share: float = 0.1,
    long_durations: tuple[float, float] = (12.0, 20.0),
) -> list[PlannedWorkload]:
    """`count` workloads; a `long_share` of them last `long_durations`, the rest `durations`
    (seconds, uniform)."""
    modes = [m for m in MODES for _ in range(MODE_WEIGHTS[m])]
    shapes = [s for s in SHAPES for _ in range(SHAPE_WEIGHTS[s])]
    planned = []
    for index in range(count):
        mode, shape = rng.choice(modes), rng.choice(shapes)
        low, high = long_durations if rng.random() < long_share else durations
        duration = round(rng.uniform(low, high), 1)
        cpu = rng.choice(CPU_SIZES)
        name = f"c{index:04d}-{shape[:3]}-{mode[:3].lower()}"
        if shape == "gang":
            workers = rng.randint(2, 3)
            body = _gang(name, mode, cpu, duration, workers)
            pods = workers + 1
        else:
            pods = 1 if shape == "single" else rng.randint(2, 4)
            body = _job(name, mode, cpu, duration, pods, indexed=shape == "indexed")
        planned.append(PlannedWorkload(index, name, mode, shape, pods, cpu, duration, body))
    return planned


def witness(name: str, duration: float) -> PlannedWorkload:
    """A one-pod BestFit workload lasting `duration`: the driver starts a few before it
    partitions or freezes a cluster, so the fault strikes work that outlives the loss
    timeout (index -1: it is not part of the planned stream)."""
    body = _job(name, "BestFit", "500m", duration, 1, indexed=False)
    return PlannedWorkload(-1, name, "BestFit", "single", 1, "500m", duration, body)


def _pod_template(cpu: str, duration: float) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {"kubesim.dev/duration": str(duration)}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sleep", str(duration)],
                    "resources": {"requests": {"cpu": cpu, "memory": MEMORY}},
                }
            ],
        },
    }


def _job(
    name: str, mode: str, cpu: str, duration: float, pods: int, *, indexed: bool
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "backoffLimit": 0,
        "template": _pod_template(cpu, duration),
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": queue_of(mode)}},
        "spec": spec,
    }


def _gang(name: str, mode: str, cpu: str, duration: float, workers: int) -> dict[str, Any]:
    def role(role_name: str, pods: int) -> dict[str, Any]:
        return {
            "name": role_name,
            "template": {
                "spec": {
                    "parallelism": pods,
                    "completions": pods,
                    "backoffLimit": 0,
                    "template": _pod_template(cpu, duration),
                }
            },
        }

    return {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"multiq.dev/queue-name": queue_of(mode)}},
        "spec": {"replicatedJobs": [role("leader", 1), role("workers", workers)]},
    }
