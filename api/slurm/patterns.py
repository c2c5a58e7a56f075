"""Filename patterns of `--output` and `--error`, expanded as sbatch(1) expands them.

    %j  the job id (an array task's own id)      %A  the array's job id (a plain job: its id)
    %a  the array task index                     %x  the job name
    %N  the (first) node's short name            %u  the user's name
    %J  jobid.stepid (the batch step: jobid.batch)
    %s  the step id ("batch")  %n  node index (0)  %t  task rank (0)  %b  index modulo 10
    %%  a literal %

A number between % and the letter pads with zeros (`%4j` → `0128`). A backslash anywhere in
the pattern turns expansion off (and is dropped), as in Slurm. An unknown letter is kept as it
is. Without an array, `%a` is Slurm's NO_VAL (4294967294). Pure. Called by: whoever writes a
task's output under its expanded name (qctl output, the job's entrypoint), tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NO_ARRAY_INDEX", "PatternValues", "default_output", "expand"]

NO_ARRAY_INDEX = 4294967294
"""What Slurm writes for %a in a job that is not an array task."""

_TOKEN = re.compile(r"%(\d*)([%AajJxNusntb])")


@dataclass(frozen=True, slots=True)
class PatternValues:
    job_id: int
    name: str
    user: str
    node: str = ""
    array_job_id: int | None = None
    array_task_id: int | None = None


def default_output(is_array: bool) -> str:
    """sbatch's default for --output (and --error, which defaults to the same file)."""
    return "slurm-%A_%a.out" if is_array else "slurm-%j.out"


def expand(pattern: str, values: PatternValues) -> str:
    if "\\" in pattern:
        return pattern.replace("\\", "")
    task = values.array_task_id
    fields: dict[str, str | int] = {
        "j": values.job_id,
        "A": values.array_job_id if values.array_job_id is not None else values.job_id,
        "a": task if task is not None else NO_ARRAY_INDEX,
        "b": (task if task is not None else 0) % 10,
        "x": values.name,
        "N": values.node.split(".", 1)[0],
        "u": values.user,
        "J": f"{values.job_id}.batch",
        "s": "batch",
        "n": 0,
        "t": 0,
    }

    def replace(match: re.Match[str]) -> str:
        width, letter = match[1], match[2]
        if letter == "%":
            return "%"
        value = fields[letter]
        if width and isinstance(value, int):
            return str(value).zfill(int(width))
        return str(value)

    return _TOKEN.sub(replace, pattern)
