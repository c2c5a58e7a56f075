"""Slurm job-array specifications (`--array`): which task indices, and how many may run at once.

    0-15        sixteen tasks, 0 to 15
    0,6,16-32   a list of indices and ranges
    0-15:4      a range with a step (0, 4, 8, 12)
    0-15%4      at most four tasks running at once (the throttle)

As sbatch(1) defines them; indices are 0 ≤ i < MAX_ARRAY_SIZE (Slurm's default MaxArraySize is
1001). Pure: parsed once where a submission is read (api.slurm.options) and used by whoever
turns the array into work. Called by: api.slurm.options, hub (throttle), tests.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

__all__ = ["MAX_ARRAY_SIZE", "ArraySpec", "ArraySpecError", "parse_array"]

MAX_ARRAY_SIZE = 1001
"""Indices must be below this (Slurm's default `MaxArraySize`)."""

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


class ArraySpecError(ValueError):
    """The `--array` text is not a valid specification; the message says why."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The task indices in ascending order, without duplicates, and the throttle (None: no
    limit on how many run at once)."""

    indices: tuple[int, ...]
    throttle: int | None = None
    # Worked out once: every task of a large array reads them (its environment, its
    # annotations), and each costs a walk over the indices.
    _step: int = field(init=False, repr=False, compare=False)
    _text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        indices = self.indices
        steps = {b - a for a, b in itertools.pairwise(indices)}
        step = steps.pop() if len(steps) == 1 else 1
        text = ",".join(str(i) for i in indices)
        if len(indices) > 2 and indices == tuple(range(indices[0], indices[-1] + 1, step)):
            text = f"{indices[0]}-{indices[-1]}" + (f":{step}" if step != 1 else "")
        if self.throttle is not None:
            text += f"%{self.throttle}"
        object.__setattr__(self, "_step", step)
        object.__setattr__(self, "_text", text)

    @property
    def count(self) -> int:
        return len(self.indices)

    @property
    def min(self) -> int:
        return self.indices[0]

    @property
    def max(self) -> int:
        return self.indices[-1]

    @property
    def step(self) -> int:
        """SLURM_ARRAY_TASK_STEP: the common step when the indices are evenly spaced, else 1
        (what sbatch reports for a list of single indices as well)."""
        return self._step

    def __str__(self) -> str:
        return self._text


def parse_array(text: str, *, max_size: int = MAX_ARRAY_SIZE) -> ArraySpec:
    spec, _, throttle_text = text.strip().partition("%")
    throttle: int | None = None
    if throttle_text:
        if not throttle_text.isdigit():
            raise ArraySpecError(
                f"the throttle after % must be a whole number, not {throttle_text!r}"
            )
        throttle = int(throttle_text)
        if throttle < 1:
            raise ArraySpecError("the throttle after % must be at least 1")
    if not spec:
        raise ArraySpecError("no indices: expected for example 0-15, 0,6,16-32 or 0-15:4")
    indices: set[int] = set()
    for part in spec.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ArraySpecError(
                f"{part!r} is not an index or a range (expected N, N-M or N-M:STEP)"
            )
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        step = int(match[3]) if match[3] is not None else 1
        if last < first:
            raise ArraySpecError(f"{part!r}: the range ends before it starts")
        if step < 1:
            raise ArraySpecError(f"{part!r}: the step must be at least 1")
        if last >= max_size:
            raise ArraySpecError(f"{part!r}: array indices must be below {max_size} (MaxArraySize)")
        indices.update(range(first, last + 1, step))
    return ArraySpec(tuple(sorted(indices)), throttle)
