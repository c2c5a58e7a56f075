"""`sbatch` options: read from a script's `#SBATCH` lines, from `SBATCH_*` environment variables
and from the command line — the command line wins over the environment, which wins over the
script, as in sbatch(1) — into one checked `SbatchOptions`.

Every option MultiQ's Slurm mode supports is in `_OPTIONS` below; an option it does not
support is an error naming it (never silently ignored), and so is a value sbatch would refuse.
Errors carry a `FieldError` per problem, addressed by the option's long name (`--array`).

Pure: no clock (`--begin` stays text until the hub reads it against its clock), no files.
Called by: qctl sbatch (to fail fast, before anything is sent), the hub (which turns the same
options into work, so every client gets the same result), tests.
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from api.errors import ApiError, FieldError, Path
from api.slurm.arrays import ArraySpec, ArraySpecError, parse_array
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


# --- the option table -----------------------------------------------------------------------

# (flags, destination, kind): kind "value" takes an argument, "flag" is a switch. The long
# name (first flag starting with --) addresses errors; SBATCH_<NAME> is its input variable.
_OPTIONS: tuple[tuple[tuple[str, ...], str, Literal["value", "flag"]], ...] = (
    (("-J", "--job-name"), "job_name", "value"),
    (("-a", "--array"), "array", "value"),
    (("-N", "--nodes"), "nodes", "value"),
    (("-n", "--ntasks"), "ntasks", "value"),
    (("--ntasks-per-node",), "ntasks_per_node", "value"),
    (("-c", "--cpus-per-task"), "cpus_per_task", "value"),
    (("--mem",), "mem", "value"),
    (("--mem-per-cpu",), "mem_per_cpu", "value"),
    (("-G", "--gpus"), "gpus", "value"),
    (("--gpus-per-node",), "gpus_per_node", "value"),
    (("--gpus-per-task",), "gpus_per_task", "value"),
    (("--gres",), "gres", "value"),
    (("-t", "--time"), "time", "value"),
    (("-p", "--partition"), "partition", "value"),
    (("-M", "--clusters"), "clusters", "value"),
    (("-o", "--output"), "output", "value"),
    (("-e", "--error"), "error", "value"),
    (("-D", "--chdir"), "chdir", "value"),
    (("--export",), "export", "value"),
    (("-d", "--dependency"), "dependency", "value"),
    (("-W", "--wait"), "wait", "flag"),
    (("-H", "--hold"), "hold", "flag"),
    (("-b", "--begin"), "begin", "value"),
    (("--comment",), "comment", "value"),
    (("--parsable",), "parsable", "flag"),
    (("--wrap",), "wrap", "value"),
    (("--profile",), "profile", "value"),
)
_LONG = {dest: next(f for f in flags if f.startswith("--")) for flags, dest, _ in _OPTIONS}

# Input environment variables sbatch reads (sbatch(1), INPUT ENVIRONMENT VARIABLES), for the
# options MultiQ supports.
_ENVIRONMENT = {
    "SBATCH_ARRAY_INX": "array",
    "SBATCH_CLUSTERS": "clusters",
    "SBATCH_ERROR": "error",
    "SBATCH_EXPORT": "export",
    "SBATCH_GPUS": "gpus",
    "SBATCH_GPUS_PER_NODE": "gpus_per_node",
    "SBATCH_GPUS_PER_TASK": "gpus_per_task",
    "SBATCH_GRES": "gres",
    "SBATCH_JOB_NAME": "job_name",
    "SBATCH_MEM_PER_CPU": "mem_per_cpu",
    "SBATCH_MEM_PER_NODE": "mem",
    "SBATCH_OUTPUT": "output",
    "SBATCH_PARTITION": "partition",
    "SBATCH_TIMELIMIT": "time",
    "SBATCH_WAIT": "wait",
}


class _Parser(argparse.ArgumentParser):
    """argparse, raising instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise SlurmOptionsError([FieldError.invalid("options", "", message)])


@functools.cache
def _parser() -> _Parser:
    """Built once per process: building it (27 options, each through argparse's help
    formatter) cost more than half of the hub's handling of one `sbatch --wrap`, and parsing
    does not change it."""
    parser = _Parser(prog="sbatch", add_help=False, allow_abbrev=False)
    for flags, dest, kind in _OPTIONS:
        if kind == "flag":
            parser.add_argument(*flags, dest=dest, action="store_const", const="1")
        else:
            parser.add_argument(*flags, dest=dest)
    return parser


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The option words of an sbatch command line, and the rest: the script and its
    arguments."""
    return _split(argv)


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options, and what follows them: the script and its arguments (sbatch stops reading
    options at the first word that is not one)."""
    takes_value = {f for flags, _, kind in _OPTIONS if kind == "value" for f in flags}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return list(argv[:i]), list(argv[i + 1 :])
        if not word.startswith("-") or word == "-":
            break
        if word in takes_value:
            i += 1  # its value is the next word
        i += 1
    return list(argv[:i]), list(argv[i:])


def _read(parser: _Parser, words: Sequence[str], origin: str) -> dict[str, str]:
    namespace, unknown = parser.parse_known_args(list(words))
    if unknown:
        option = unknown[0].split("=", 1)[0]
        if option.startswith("-"):
            detail = "not an sbatch option MultiQ's Slurm mode supports (see qctl sbatch --help)"
            raise SlurmOptionsError([FieldError.invalid(Path(option), unknown[0], detail)])
        raise SlurmOptionsError(
            [FieldError.invalid("options", unknown[0], f"unexpected word in {origin}")]
        )
    return {k: v for k, v in vars(namespace).items() if v is not None}


def script_directives(script: str) -> list[str]:
    """The option words of a script's `#SBATCH` lines: those before the first line that is
    neither blank nor a comment (sbatch reads no further). Words are split as a shell would;
    anything after a `#` inside a directive is a comment."""
    words: list[str] = []
    for number, line in enumerate(script.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if not stripped.startswith("#SBATCH"):
            continue
        try:
            words += shlex.split(stripped.removeprefix("#SBATCH"), comments=True)
        except ValueError as exc:
            raise SlurmOptionsError(
                [FieldError.invalid(f"script line {number}", stripped, str(exc))]
            ) from exc
    return words


def parse_sbatch(
    argv: Sequence[str], script: str | None = None, environment: Mapping[str, str] | None = None
) -> tuple[SbatchOptions, list[str]]:
    """The options of one `sbatch ARGV` run (with the script's text, when there is one, and the
    submitter's environment), and the script's own arguments."""
    parser = _parser()
    options_words, rest = _split(argv)
    command_line = _read(parser, options_words, "the command line")
    from_env: dict[str, str] = {}
    for name, dest in _ENVIRONMENT.items():
        value = (environment or {}).get(name)
        if value:
            from_env[dest] = value
    from_script = _read(parser, script_directives(script), "#SBATCH lines") if script else {}
    merged = {**from_script, **from_env, **command_line}
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
