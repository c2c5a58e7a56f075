"""The words of an sbatch submission, read but not yet checked: which supported option each
word is, what value it carries, and where the script and its arguments start — from the
command line, `SBATCH_*` variables and the script's `#SBATCH` lines, the command line winning
over the environment, which wins over the script (sbatch(1)).

The table of the options MultiQ's Slurm mode supports lives here (`OPTIONS`); a word naming
any other option is a `DirectiveError` naming it. The words are read as getopt_long reads
them: `--name=value`, `--name value`, `-Xvalue`, `-X value`, switches alone or grouped
(`-WH`).

Kept apart from api.slurm.options, which turns these texts into checked `SbatchOptions`,
because qctl sbatch needs only this much before it sends a submission (which words are the
script, `--parsable`, `--wait`, the variables `--export` names): it imports nothing beyond
`re` and `shlex`, and a loop of qctl sbatch calls starts that much sooner. The hub reads the
values (api.slurm.options), so every client gets the same checks.

Pure. Called by: api.slurm.options, qctl sbatch, tests.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Literal

__all__ = [
    "ENVIRONMENT",
    "LONG",
    "OPTIONS",
    "DirectiveError",
    "exported_names",
    "raw_options",
    "read_words",
    "script_directives",
    "split_argv",
]

OptionKind = Literal["value", "flag"]

# (flags, destination, kind): kind "value" takes an argument, "flag" is a switch. The long
# name (first flag starting with --) addresses errors.
OPTIONS: tuple[tuple[tuple[str, ...], str, OptionKind], ...] = (
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
LONG = {dest: next(f for f in flags if f.startswith("--")) for flags, dest, _ in OPTIONS}
_BY_FLAG: dict[str, tuple[str, OptionKind]] = {
    flag: (dest, kind) for flags, dest, kind in OPTIONS for flag in flags
}

# Input environment variables sbatch reads (sbatch(1), INPUT ENVIRONMENT VARIABLES), for the
# options MultiQ supports.
ENVIRONMENT = {
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


class DirectiveError(ValueError):
    """A word sbatch would not read: `where` is the option (`--qos`) or the place (`options`,
    `script line 3`), `word` what was written, `detail` why."""

    def __init__(self, where: str, word: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.where = where
        self.word = word
        self.detail = detail


def _unsupported(option: str, word: str) -> DirectiveError:
    detail = "not an sbatch option MultiQ's Slurm mode supports (see qctl sbatch --help)"
    return DirectiveError(option, word, detail)


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The option words of an sbatch command line, and what follows them: the script and its
    arguments (sbatch stops reading options at the first word that is not one)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return list(argv[:i]), list(argv[i + 1 :])
        if not word.startswith("-") or word == "-":
            break
        if _takes_next_word(word):
            i += 1  # its value is the next word
        i += 1
    return list(argv[:i]), list(argv[i:])


def _takes_next_word(word: str) -> bool:
    """Whether an option word's value is the word after it (`-J`, `-WJ`, `--job-name`), as
    `read_words` reads it."""
    if word.startswith("--"):
        return "=" not in word and _BY_FLAG.get(word, ("", "flag"))[1] == "value"
    for j in range(1, len(word)):
        dest, kind = _BY_FLAG.get("-" + word[j], ("", "flag"))
        if not dest:
            return False  # read_words will name it
        if kind == "value":
            return j == len(word) - 1
    return False


def read_words(words: Sequence[str], origin: str) -> dict[str, str]:
    """Each option's text by destination (a switch's is "1"); the last spelling wins."""
    found: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            dest, kind = _BY_FLAG.get(name, ("", "flag"))
            if not dest:
                raise _unsupported(name, word)
            if kind == "flag":
                if eq:
                    raise DirectiveError(name, word, "takes no value")
                found[dest] = "1"
            else:
                if not eq:
                    i += 1
                    if i >= len(words):
                        raise DirectiveError(name, word, "expects a value")
                    value = words[i]
                found[dest] = value
        elif word.startswith("-") and len(word) > 1:
            j = 1
            while j < len(word):  # switches may be grouped (-WH); a value ends the word
                flag = "-" + word[j]
                dest, kind = _BY_FLAG.get(flag, ("", "flag"))
                if not dest:
                    raise _unsupported(flag, word)
                if kind == "flag":
                    found[dest] = "1"
                    j += 1
                    continue
                value = word[j + 1 :].removeprefix("=")
                if not value:
                    i += 1
                    if i >= len(words):
                        raise DirectiveError(flag, word, "expects a value")
                    value = words[i]
                found[dest] = value
                break
        else:
            raise DirectiveError("options", word, f"unexpected word in {origin}")
        i += 1
    return found


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
            raise DirectiveError(f"script line {number}", stripped, str(exc)) from exc
    return words


def raw_options(
    argv: Sequence[str], script: str | None, environment: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """Every option's text, merged (command line over `SBATCH_*` over `#SBATCH`), and what
    follows the options on the command line: the script's path and its arguments."""
    options_words, rest = split_argv(argv)
    command_line = read_words(options_words, "the command line")
    from_env = {
        dest: value
        for name, dest in ENVIRONMENT.items()
        if (value := (environment or {}).get(name))
    }
    from_script = read_words(script_directives(script), "#SBATCH lines") if script else {}
    return {**from_script, **from_env, **command_line}, rest


def exported_names(export: str | None) -> list[str]:
    """The variables an `--export` text names without a value (the submitter's are sent)."""
    if export is None:
        return []
    return [
        item
        for item in export.split(",")
        if item and "=" not in item and item not in ("ALL", "NONE")
    ]
