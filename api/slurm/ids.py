"""Slurm job ids: how the numbers the hub allocates are shared out among a submission's tasks,
and how a user names a job or one task of an array (`1234`, `1234_7`).

Real Slurm 22.05 gives an array one id (SLURM_ARRAY_JOB_ID) and every task its own job id, the
**last** task keeping the array's (shared/reference/slurm.md). MultiQ allocates a block of n
ids for an array of n tasks, first id A: the array is A, the tasks in index order take A+1 …
A+n-1, and the last task takes A. A plain job is one task: its id is A.

Pure. Called by: the hub (allocation, lookups), qctl (reading ids), tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from api.slurm.arrays import ArraySpec

__all__ = ["JobRef", "TaskIds", "parse_job_ref", "task_ids"]

_REF = re.compile(r"^(\d+)(?:_(\d+|\[[0-9,\-]+\]))?$")


@dataclass(frozen=True, slots=True)
class TaskIds:
    """The ids one task (one workload) carries."""

    job_id: int
    array_job_id: int | None = None
    array_task_id: int | None = None

    @property
    def display(self) -> str:
        """How squeue and sacct name it: `1234`, or `1233_7` for a task of array 1233."""
        if self.array_job_id is None:
            return str(self.job_id)
        return f"{self.array_job_id}_{self.array_task_id}"


def task_ids(first: int, array: ArraySpec | None) -> list[TaskIds]:
    """The ids of every task of a submission given the first id of its block (see the module
    docstring); the block is `len(result)` ids long."""
    if array is None:
        return [TaskIds(first)]
    last = len(array.indices) - 1
    return [
        TaskIds(first if position == last else first + 1 + position, first, index)
        for position, index in enumerate(array.indices)
    ]


@dataclass(frozen=True, slots=True)
class JobRef:
    """`N` (a job, or every task of array N) or `N_I` (task I of array N); `N_[1-3,5]`
    names several tasks."""

    job_id: int
    tasks: tuple[int, ...] | None = None


def parse_job_ref(text: str) -> JobRef:
    match = _REF.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a job id (N, N_INDEX or N_[RANGE])")
    job_id = int(match[1])
    if match[2] is None:
        return JobRef(job_id)
    spec = match[2].strip("[]")
    tasks: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{text!r}: {part!r} is not an index or a range")
        tasks.update(range(int(low), int(high or low) + 1))
    return JobRef(job_id, tuple(sorted(tasks)))
