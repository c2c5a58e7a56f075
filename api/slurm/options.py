"""`sbatch` options: read from a script's `#SBATCH` lines, from `SBATCH_*` environment variables
and from the command line — the command line wins over the environment, which wins over the
script, as in sbatch(1) — into one checked `SbatchOptions`.

The words are read by api.slurm.directives, which holds the table of every option MultiQ's
Slurm mode supports; an option it does not support is an error naming it (never silently
ignored), and so is a value sbatch would refuse (checked here). Errors carry a `FieldError`
per problem, addressed by the option's long name (`--array`).

Pure: no clock (`--begin` stays text until the hub reads it against its clock), no files.
Called by: the hub (which turns the options into work, so every client gets the same result
and the same errors), tests. qctl sbatch reads only the words (api.slurm.directives).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.errors import ApiError, FieldError, Path
from api.slurm.arrays import ArraySpec, ArraySpecError, parse_array
from api.slurm.directives import LONG as _LONG
from api.slurm.directives import DirectiveError, raw_options, script_directives, split_argv
from api.slurm.units import UnitError, parse_memory_mib, parse_time_limit

__all__ = [
    "DEPENDENCY_TYPES",
    "Dependency",
    "DependencySpec",
    "ExportSpec",
    "GpuCount",
    "SbatchOptions",
    "SlurmOptionsError",
    "parse_dependency",
    "parse_export",
    "parse_gpus",
    "parse_sbatch",
    "script_directives",
    "split_argv",
]

DEPENDENCY_TYPES = ("after", "afterany", "afterok", "afternotok")
_JOB_NAME_LIMIT = 200
_GPU = re.compile(r"^(?:(?P<kind>[A-Za-z0-9_./-]+):)?(?P<count>\d+)$")
_GRES = re.compile(r"^gpu(?::(?P<kind>[A-Za-z0-9_./-]+))?(?::(?P<count>\d+))?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_REF = re.compile(r"^\d+(?:_\d+)?$")


class SlurmOptionsError(ApiError):
    """The options, script or environment hold something sbatch or MultiQ would refuse."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


@dataclass(frozen=True, slots=True)
class GpuCount:
    """`[type:]N`: `kind` is the GPU type as the user wrote it (a resource name such as
    nvidia.com/gpu, or a model the profile maps to one), None when not given."""

    count: int
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class Dependency:
    """One `type:id[:id…]` term; `job_ids` are `N` or `N_IDX` as written."""

    type: str
    job_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DependencySpec:
    """`--dependency`: every term must hold (`,`) or any one of them (`?`); `singleton` waits
    for every earlier job of the same name and user to end."""

    terms: tuple[Dependency, ...] = ()
    any_of: bool = False
    singleton: bool = False


@dataclass(frozen=True, slots=True)
class ExportSpec:
    """`--export`: `ALL` (the submitter's environment, the default), `NONE`, or named variables
    (`NAME` takes the submitter's value, `NAME=value` sets one), optionally after `ALL`."""

    all: bool = True
    names: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SbatchOptions:
    job_name: str | None = None
    array: ArraySpec | None = None
    nodes: int = 1
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int = 1
    mem_per_node_mib: int | None = None
    mem_per_cpu_mib: int | None = None
    gpus: GpuCount | None = None
    gpus_per_node: GpuCount | None = None
    gpus_per_task: GpuCount | None = None
    time_limit_seconds: int | None = None
    partition: str | None = None
    clusters: str | None = None
    output: str | None = None
    error: str | None = None
    chdir: str | None = None
    export: ExportSpec = field(default_factory=ExportSpec)
    dependency: DependencySpec = field(default_factory=DependencySpec)
    wait: bool = False
    hold: bool = False
    begin: str | None = None
    comment: str | None = None
    parsable: bool = False
    wrap: str | None = None
    profile: str | None = None
    given: frozenset[str] = frozenset()
    """The long names (without dashes) of the options given anywhere: a profile's required
    flags are checked against them (a default value cannot tell)."""

    @property
    def tasks(self) -> int:
        """SLURM_NTASKS: as given, else one per node (times --ntasks-per-node)."""
        if self.ntasks is not None:
            return self.ntasks
        return self.nodes * (self.ntasks_per_node or 1)

    @property
    def tasks_per_node(self) -> int:
        """Tasks on each node (each pod): spread evenly, the first nodes taking the rest."""
        return -(-self.tasks // self.nodes)

    @property
    def cpus_per_node(self) -> int:
        return self.tasks_per_node * self.cpus_per_task

    @property
    def memory_per_node_mib(self) -> int | None:
        if self.mem_per_node_mib is not None:
            return self.mem_per_node_mib
        if self.mem_per_cpu_mib is not None:
            return self.mem_per_cpu_mib * self.cpus_per_node
        return None

    @property
    def gpus_on_node(self) -> GpuCount | None:
        """GPUs each node (pod) needs, from whichever form was given."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        if self.gpus_per_task is not None:
            per_task = self.gpus_per_task
            return GpuCount(per_task.count * self.tasks_per_node, per_task.kind)
        if self.gpus is not None:
            return GpuCount(-(-self.gpus.count // self.nodes), self.gpus.kind)
        return None


def parse_sbatch(
    argv: Sequence[str], script: str | None = None, environment: Mapping[str, str] | None = None
) -> tuple[SbatchOptions, list[str]]:
    """The options of one `sbatch ARGV` run (with the script's text, when there is one, and the
    submitter's environment), and the script's own arguments."""
    try:
        merged, rest = raw_options(argv, script, environment)
    except DirectiveError as exc:
        raise SlurmOptionsError(
            [FieldError.invalid(Path(exc.where), exc.word, exc.detail)]
        ) from exc
    script_args = rest[1:] if rest else []
    if merged.get("wrap") is not None and rest:
        raise SlurmOptionsError(
            [FieldError.forbidden("--wrap", "give either a script or --wrap, not both")]
        )
    if merged.get("wrap") is None and script is None:
        raise SlurmOptionsError(
            [FieldError.required("script", "give a batch script, or a command with --wrap")]
        )
    return _build(merged), script_args


# --- values ---------------------------------------------------------------------------------


def parse_gpus(text: str) -> GpuCount:
    match = _GPU.match(text.strip())
    if match is None or int(match["count"]) < 1:
        raise ValueError(f"{text!r} is not [type:]count with a count of at least 1")
    return GpuCount(int(match["count"]), match["kind"])


def _parse_gres(text: str) -> GpuCount:
    terms = [t for t in text.split(",") if t]
    gpus = [t for t in terms if t.startswith("gpu")]
    others = [t for t in terms if not t.startswith("gpu")]
    if others:
        raise ValueError(f"only gpu resources are supported, not {', '.join(others)}")
    if len(gpus) != 1:
        raise ValueError("give one gpu[:type][:count] term")
    match = _GRES.match(gpus[0])
    if match is None:
        raise ValueError(f"{gpus[0]!r} is not gpu[:type][:count]")
    count = int(match["count"] or 1)
    if count < 1:
        raise ValueError("the count must be at least 1")
    return GpuCount(count, match["kind"])


def parse_dependency(text: str) -> DependencySpec:
    value = text.strip()
    if "," in value and "?" in value:
        raise ValueError("use either ',' (all must hold) or '?' (any may hold), not both")
    any_of = "?" in value
    terms: list[Dependency] = []
    singleton = False
    for term in value.split("?" if any_of else ","):
        if term == "singleton":
            singleton = True
            continue
        kind, _, ids = term.partition(":")
        if kind not in DEPENDENCY_TYPES:
            supported = ", ".join((*DEPENDENCY_TYPES, "singleton"))
            raise ValueError(f"{kind!r} is not a supported dependency type ({supported})")
        job_ids = tuple(i for i in ids.split(":") if i)
        if not job_ids:
            raise ValueError(f"{term!r} names no job")
        for job_id in job_ids:
            if "+" in job_id:
                raise ValueError(f"{term!r}: a delay after a job (+minutes) is not supported")
            if not _JOB_REF.match(job_id):
                raise ValueError(f"{job_id!r} is not a job id (N, or N_INDEX for an array task)")
        terms.append(Dependency(kind, job_ids))
    return DependencySpec(tuple(terms), any_of, singleton)


def parse_export(text: str) -> ExportSpec:
    value = text.strip()
    if value == "ALL":
        return ExportSpec()
    if value == "NONE":
        return ExportSpec(all=False)
    names: list[str] = []
    values: list[tuple[str, str]] = []
    all_too = False
    for item in value.split(","):
        if item == "ALL":
            all_too = True
            continue
        if item == "NONE":
            raise ValueError("NONE cannot be combined with variables")
        name, eq, setting = item.partition("=")
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if eq:
            values.append((name, setting))
        else:
            names.append(name)
    return ExportSpec(all=all_too, names=tuple(names), values=tuple(values))


def _whole(text: str, least: int) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a whole number")
    number = int(text)
    if number < least:
        raise ValueError(f"must be at least {least}")
    return number


def _build(raw: Mapping[str, str]) -> SbatchOptions:
    errors: list[FieldError] = []
    values: dict[str, Any] = {}

    def read(dest: str, convert: Any, into: str | None = None) -> None:
        text = raw.get(dest)
        if text is None:
            return
        try:
            values[into or dest] = convert(text)
        except (ValueError, ArraySpecError, UnitError) as exc:
            errors.append(FieldError.invalid(_LONG[dest], text, str(exc)))

    def nodes(text: str) -> int:
        low, _, high = text.partition("-")
        count = _whole(low, 1)
        if high and _whole(high, count) != count:
            raise ValueError("a range of node counts is not supported: give one number")
        return count

    def name(text: str) -> str:
        if not text or len(text) > _JOB_NAME_LIMIT:
            raise ValueError(f"must be 1 to {_JOB_NAME_LIMIT} characters")
        if any(not c.isprintable() for c in text):
            raise ValueError("must be printable")
        return text

    read("job_name", name)
    read("array", parse_array)
    read("nodes", nodes)
    read("ntasks", lambda t: _whole(t, 1))
    read("ntasks_per_node", lambda t: _whole(t, 1))
    read("cpus_per_task", lambda t: _whole(t, 1))
    read("mem", parse_memory_mib, "mem_per_node_mib")
    read("mem_per_cpu", parse_memory_mib, "mem_per_cpu_mib")
    read("gpus", parse_gpus)
    read("gpus_per_node", parse_gpus)
    read("gpus_per_task", parse_gpus)
    read("gres", _parse_gres, "gpus_per_node")
    read("time", parse_time_limit, "time_limit_seconds")
    read("partition", str)
    read("clusters", str)
    read("output", str)
    read("error", str)
    read("chdir", str)
    read("export", parse_export)
    read("dependency", parse_dependency)
    read("begin", str)
    read("comment", str)
    read("wrap", str)
    read("profile", str)
    for flag in ("wait", "hold", "parsable"):
        if raw.get(flag):
            values[flag] = True
    values["given"] = frozenset(_LONG[dest][2:] for dest in raw)

    both: Iterable[tuple[str, str]] = (("mem", "mem_per_cpu"), ("gpus_per_node", "gres"))
    for first, second in both:
        if first in raw and second in raw:
            errors.append(
                FieldError.forbidden(
                    _LONG[second], f"{_LONG[first]} and {_LONG[second]} exclude each other"
                )
            )
    gpu_forms = [d for d in ("gpus", "gpus_per_node", "gpus_per_task", "gres") if d in raw]
    if len(gpu_forms) > 1 and errors == []:
        errors.append(
            FieldError.forbidden(
                _LONG[gpu_forms[1]], f"give GPUs one way ({', '.join(_LONG[d] for d in gpu_forms)})"
            )
        )
    if errors:
        raise SlurmOptionsError(errors)
    options = SbatchOptions(**values)
    if options.ntasks is not None and options.ntasks < options.nodes:
        raise SlurmOptionsError(
            [
                FieldError.invalid(
                    "--ntasks", options.ntasks, f"fewer tasks than nodes ({options.nodes})"
                )
            ]
        )
    if options.array is not None and options.array.count == 0:
        raise SlurmOptionsError([FieldError.invalid("--array", raw["array"], "no indices")])
    return options
