"""qctl's Slurm verbs, for researchers who type Slurm's:

    qctl sbatch [OPTIONS] SCRIPT [ARGS] | --wrap CMD    Submitted batch job N
    qctl squeue [-u U] [-t S] [-j IDS] [-p P] [-o FMT] [--start]
    qctl scancel [ID|ID_IDX …] [-u U] [-n NAME] [-t STATES]
    qctl sacct [-j IDS] [-S START] [-E END] [-o|--format FIELDS]
    qctl scontrol hold|release ID …
    qctl output JOBID                                   write its tasks' output files here

`sbatch` reads the words here first (api.slurm.directives: which options, where the script
starts), so an option MultiQ does not support fails at once in one line, then sends the script,
the command line, the environment `--export` may carry (never what api.slurm.export keeps back:
tokens, secrets, this machine's session) and who and where the submitter is; the hub checks the
values (api.slurm.options: a bad value is its one-line 422), builds the work and answers with
the job id. Only that much is imported before the request: a loop of sbatch calls pays for
little more than the interpreter and one round trip (bench.slurm_mode_throughput). MultiQ's
connection flags are long-only here (`--namespace`, `--server`, `--token`, `--context`): `-n`,
`-p`, `-M` are sbatch's.

Output files: with no shared volume the hub keeps each task's log, and `--wait` or
`qctl output` write them under the expanded `--output` name (api.slurm.patterns) relative to
the current directory; with an `--error` name of its own, the task's stderr (kept apart in
the pod log by the job's prologue, api.slurm.environment) goes to that file, otherwise both
streams go to the output file, as in Slurm.

One-shot requests use qctl.rest (http.client); only `--wait` and `output` load the streaming
client, to read logs. Called by: qctl.main (through qctl.cli).
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from api.slurm.directives import DirectiveError, exported_names, raw_options, split_argv
from api.slurm.export import exportable
from qctl.commands.common import connect, write
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.rest import HubSession

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "CONNECTION_FLAGS",
    "run_output",
    "run_sacct",
    "run_sbatch",
    "run_scancel",
    "run_scontrol",
    "run_squeue",
    "strip_connection_flags",
]

SLURM_API = "/apis/slurm.multiq.dev/v1alpha1"
CONNECTION_FLAGS = ("--server", "--token", "--context", "--namespace")
POLL_SECONDS = 0.5


class SbatchError(QctlError):
    """What sbatch would refuse, said in one line."""


def strip_connection_flags(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """qctl's own long connection flags among the sbatch options (before the script), and the
    command line without them."""
    found: dict[str, str | None] = dict.fromkeys(("server", "token", "context", "namespace"))
    kept: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if name in CONNECTION_FLAGS and not split_argv(kept)[1]:
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                value = argv[i + 1]
                i += 1
            found[name[2:]] = value
        else:
            kept.append(word)
        i += 1
    return argparse.Namespace(**found), kept


def _submitter() -> dict[str, Any]:
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        nice = 0
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = os.environ.get("USER") or os.environ.get("LOGNAME") or str(os.getuid())
    return {
        "user": user,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "host": os.uname().nodename,
        "directory": os.getcwd(),
        "nice": nice,
        "utcOffsetSeconds": time.localtime().tm_gmtoff,
    }


def run_sbatch(args: argparse.Namespace, out: TextIO) -> int:
    connection, argv = strip_connection_flags(args.argv)
    options_words, rest = split_argv(argv)
    script: str | None = None
    script_path: str | None = None
    environment = dict(os.environ)
    if rest:
        script_path = rest[0]
        try:
            with open(script_path, encoding="utf-8") as script_file:
                script = script_file.read()
        except OSError as exc:
            raise SbatchError(f"sbatch: unable to open file {script_path}: {exc.strerror}") from exc
    elif "--wrap" not in " ".join(options_words) and not sys.stdin.isatty():
        script = sys.stdin.read()  # sbatch reads the script from stdin when none is named
    try:
        options, _ = raw_options(argv, script, environment)
    except DirectiveError as exc:
        raise SbatchError(f"sbatch: {exc}") from exc
    if options.get("wrap") is None and script is None:
        raise SbatchError("sbatch: give a batch script, or a command with --wrap")
    if options.get("wrap") is None and script is not None and not script.startswith("#!"):
        raise SbatchError(
            "sbatch: this does not look like a batch script: its first line must start with #! "
            "followed by the path to an interpreter"
        )
    sent = exportable(environment)
    sent |= {k: v for k, v in environment.items() if k.startswith("SBATCH_")}
    sent |= {n: environment[n] for n in exported_names(options.get("export")) if n in environment}
    context = connect(connection)
    hub = HubSession(context)
    body = {
        "argv": argv,
        "script": script,
        "scriptPath": script_path,
        "environment": sent,
        "submitter": _submitter(),
    }
    try:
        reply = hub.request("POST", f"{SLURM_API}/namespaces/{context.namespace}/jobs", body=body)
    except HubRequestError as exc:
        if exc.status != 422:
            raise
        # The hub's message already says every problem in one line ("sbatch: --mem: …");
        # the field errors under it would say them again.
        raise SbatchError(str(exc).splitlines()[0]) from exc
    job_id = reply["jobId"]
    write(out, f"{job_id}\n" if "parsable" in options else f"Submitted batch job {job_id}\n")
    if "wait" not in options:
        return 0
    tasks = len(reply.get("workloads") or [job_id])
    rows = _wait_ended(hub, context.namespace, str(job_id), tasks, sleep=time.sleep)
    _write_outputs(connection, rows)
    return max((_exit_status(row) for row in rows), default=0)


def _exit_status(row: dict[str, Any]) -> int:
    code, _, signal = str(row.get("exitCode", "0:0")).partition(":")
    if row["state"] in ("CANCELLED", "TIMEOUT") and code == "0":
        return 128 + int(signal or 15)
    return int(code or 0) or (1 if row["state"] not in ("COMPLETED",) else 0)


def _rows(hub: HubSession, namespace: str | None, params: dict[str, str]) -> list[dict[str, Any]]:
    path = f"{SLURM_API}/namespaces/{namespace}/jobs" if namespace else f"{SLURM_API}/jobs"
    items: list[dict[str, Any]] = hub.request("GET", path, params=params).get("items", [])
    return items


def _wait_ended(
    hub: HubSession, namespace: str, job: str, tasks: int, *, sleep: Callable[[float], None]
) -> list[dict[str, Any]]:
    """Every task's row once all `tasks` have ended. Polls ask only for the tasks that have
    not ended (the hub builds just those rows), then the whole job is read once."""
    unfinished = {"jobs": job, "history": "true", "states": "PENDING,RUNNING"}
    while True:
        if not _rows(hub, namespace, unfinished):
            rows = _rows(hub, namespace, {"jobs": job, "history": "true"})
            if len(rows) >= tasks and all(r["state"] not in ("PENDING", "RUNNING") for r in rows):
                return rows
        sleep(POLL_SECONDS)


# --- output files ---------------------------------------------------------------------------


def _output_names(row: dict[str, Any]) -> tuple[str, str]:
    # sbatch without --wait does not need it
    from api.slurm.patterns import PatternValues, default_output, expand  # noqa: PLC0415

    is_array = row.get("arrayJobId") is not None
    values = PatternValues(
        job_id=int(row["id"]),
        name=str(row["name"]),
        user=str(row["user"]),
        node=str((row.get("nodeNames") or [row.get("nodeList") or ""])[0]),
        array_job_id=row.get("arrayJobId"),
        array_task_id=row.get("arrayTaskId"),
    )
    output = expand(row.get("output") or default_output(is_array), values)
    error = expand(row["error"], values) if row.get("error") else output
    return output, error


def _task_logs(connection: argparse.Namespace, rows: list[dict[str, Any]]) -> list[list[str]]:
    """Every line of each task's log, from the hub. The streaming client (aiohttp) is loaded
    only here."""
    import asyncio  # noqa: PLC0415 - see the docstring

    from qctl.client import HubClient  # noqa: PLC0415

    context = connect(connection)

    async def fetch() -> list[list[str]]:
        async with HubClient(context) as client:
            return [
                [
                    str(record["line"])
                    async for record in client.logs(row["namespace"], row["workload"], {})
                    if "line" in record
                ]
                for row in rows
            ]

    return asyncio.run(fetch())


def _write_outputs(connection: argparse.Namespace, rows: list[dict[str, Any]]) -> list[str]:
    """Write each task's stdout under its expanded output name and, when `--error` names a
    file of its own, its stderr under that one; the names written."""
    from pathlib import Path  # noqa: PLC0415 - only --wait and output write files

    from api.slurm.environment import split_streams  # noqa: PLC0415 - likewise

    written = []
    for row, lines in zip(rows, _task_logs(connection, rows), strict=True):
        output, error = _output_names(row)
        stdout, stderr = split_streams(lines)
        if error == output:
            files = {output: stdout + stderr}
        else:
            files = {output: stdout, error: stderr}
        for name, text in files.items():
            path = Path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{line}\n" for line in text))
            written.append(name)
    return written


def run_output(args: argparse.Namespace, out: TextIO) -> int:
    context = connect(args)
    hub = HubSession(context)
    rows = _rows(hub, context.namespace, {"jobs": args.job, "history": "true"})
    if not rows:
        raise QctlError(f"invalid job id specified: {args.job}")
    for name in _write_outputs(args, rows):
        write(out, f"{name}\n")
    return 0


# --- squeue, sacct ----------------------------------------------------------------------------


def _listing_params(args: argparse.Namespace) -> dict[str, str]:
    params: dict[str, str] = {}
    for flag, name in (("jobs", "jobs"), ("user", "users"), ("partition", "partitions")):
        value = getattr(args, flag, None)
        if value:
            params[name] = value
    states = getattr(args, "states", None)
    if states and states.lower() != "all":
        params["states"] = states
    return params


def run_squeue(args: argparse.Namespace, out: TextIO) -> int:
    context = connect(args)
    hub = HubSession(context)
    params = _listing_params(args)
    if args.start:
        params["states"] = "PENDING"
    rows = _rows(hub, None if args.all_namespaces else context.namespace, params)
    if not getattr(args, "states", None) and not args.start:
        rows = [r for r in rows if r["state"] in ("PENDING", "RUNNING")] or [
            r for r in rows if args.jobs
        ]
    from qctl import slurmview  # noqa: PLC0415 - sbatch, the one verb called in loops, needs none

    shown = slurmview.collapse_pending_arrays(rows)
    fmt = args.format or (slurmview.SQUEUE_START if args.start else slurmview.SQUEUE_DEFAULT)
    write(out, slurmview.squeue_table(shown, fmt, header=not args.noheader))
    return 0


def _local_time(text: str, now: datetime) -> datetime:
    """sacct's -S/-E: YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS] (today), now, or now-N[units]."""
    from datetime import datetime, timedelta  # noqa: PLC0415 - as slurmview in run_squeue

    value = text.strip()
    if value == "now":
        return now
    if value.startswith("now-"):
        amount = value[4:]
        digits = "".join(c for c in amount if c.isdigit())
        unit = amount[len(digits) :] or "seconds"
        scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(unit[0], 1)
        return now - timedelta(seconds=int(digits or 0) * scale)
    try:
        if ":" in value and "-" not in value:
            parts = [int(p) for p in value.split(":")]
            local = now.astimezone()
            return local.replace(
                hour=parts[0], minute=parts[1], second=parts[2] if len(parts) > 2 else 0
            )
        return datetime.fromisoformat(value).astimezone()
    except (ValueError, IndexError) as exc:
        raise UsageError(f"invalid time {text!r}: use YYYY-MM-DD[THH:MM[:SS]] or HH:MM") from exc


def run_sacct(args: argparse.Namespace, out: TextIO) -> int:
    from datetime import UTC, datetime  # noqa: PLC0415 - as slurmview in run_squeue

    from qctl import slurmview  # noqa: PLC0415

    context = connect(args)
    hub = HubSession(context)
    params = _listing_params(args)
    params["history"] = "true"
    now = datetime.now(UTC)
    if args.starttime:
        params["start"] = _local_time(args.starttime, now).astimezone(UTC).isoformat()
    elif not args.jobs:
        midnight = now.astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        params["start"] = midnight.astimezone(UTC).isoformat()
    if args.endtime:
        params["end"] = _local_time(args.endtime, now).astimezone(UTC).isoformat()
    rows = _rows(hub, None if args.all_namespaces else context.namespace, params)
    try:
        table = slurmview.sacct_table(
            rows, args.format or slurmview.SACCT_DEFAULT, header=not args.noheader
        )
    except ValueError as exc:
        raise UsageError(f"sacct: {exc}") from exc
    write(out, table)
    return 0


# --- scancel, scontrol ------------------------------------------------------------------------


def _act(args: argparse.Namespace, action: str, body: dict[str, str]) -> list[str]:
    context = connect(args)
    hub = HubSession(context)
    path = f"{SLURM_API}/namespaces/{context.namespace}/jobs/{action}"
    done: list[str] = hub.request("POST", path, body=body).get("jobs", [])
    return done


def run_scancel(args: argparse.Namespace, out: TextIO) -> int:
    body = {
        k: v
        for k, v in (
            ("jobs", ",".join(args.jobs)),
            ("users", args.user),
            ("names", args.name),
            ("states", args.states),
        )
        if v
    }
    if not body:
        raise UsageError("scancel: no job identification provided")
    done = _act(args, "cancel", body)
    if args.verbose:
        for job in done:
            write(out, f"scancel: Terminating job {job}\n")
    return 0


def run_scontrol(args: argparse.Namespace, out: TextIO) -> int:
    done = _act(args, args.action, {"jobs": ",".join(args.jobs)})
    if not done:
        raise QctlError(f"scontrol {args.action}: no pending job matches {' '.join(args.jobs)}")
    if args.verbose:
        write(out, "".join(f"{job}\n" for job in done))
    return 0
