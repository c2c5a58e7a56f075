"""`qctl create job|jobset|slurm --profile P`: a workload from an ApplicationProfile.

    qctl create job --profile P [--cmd CMD] [--parallelism N] [--completions N]
        [--request cpu=2,memory=4Gi] [--localqueue Q] [--priority C] [--time T] [--name N]
        [--pod-template-label k=v]… [-n NS] [--dry-run] [-o yaml|json]
    qctl create jobset --profile P [--replicas N] …
    qctl create slurm --profile P [--localqueue Q] -- [SBATCH OPTIONS] SCRIPT [ARGS]

The hub expands the profile (hub.templates), so qctl and a REST caller get the same object:
qctl sends the flags given — no others, so the profile's required flags can be checked — as a
JobRequest to `POST …/applicationprofiles/P/instantiate` (`?dryRun=All` with --dry-run) and
prints what comes back: `workload/NAME created`, or with -o the object (with --dry-run the Job
or JobSet that would be submitted, else the Workload). `create slurm` is `qctl sbatch --profile
P [--partition Q] …`: the Slurm mode's flags are sbatch's.

Imports http.client (qctl.rest) and, for -o yaml only, yaml. Called by: qctl.main (through
qctl.cli).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, TextIO
from urllib.parse import quote

from qctl import render
from qctl.cli import load_runner
from qctl.commands.common import connect, write
from qctl.errors import UsageError
from qctl.kinds import API_PREFIX
from qctl.rest import HubSession

__all__ = ["job_request", "run_create", "run_create_slurm"]

MODES = {"job": "Job", "jobset": "JobSet"}


def _pairs(flag: str, items: list[str]) -> dict[str, str]:
    """`k=v` words (each maybe a comma list) as a map; a word without `=` is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        for word in item.split(","):
            key, eq, value = word.partition("=")
            if not eq or not key.strip():
                raise UsageError(f"{flag}: expected KEY=VALUE, got {word!r}")
            out[key.strip()] = value.strip()
    return out


def job_request(args: argparse.Namespace) -> dict[str, Any]:
    """The JobRequest of a `qctl create job|jobset` command line: the flags given only."""
    body: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "JobRequest",
        "mode": MODES[args.kind],
    }
    if args.name is not None:
        body["name"] = args.name
    if args.cmd is not None:
        try:
            body["cmd"] = shlex.split(args.cmd)
        except ValueError as exc:
            raise UsageError(f"--cmd: {exc}") from exc
    for flag in ("parallelism", "completions", "replicas"):
        value = getattr(args, flag, None)
        if value is not None:
            body[flag] = value
    if args.request is not None:
        body["requests"] = _pairs("--request", [args.request])
    if args.localqueue is not None:
        body["localQueue"] = args.localqueue
    if args.priority is not None:
        body["priority"] = args.priority
    if args.time is not None:
        body["time"] = args.time
    if args.pod_template_label:
        body["podTemplateLabels"] = _pairs("--pod-template-label", args.pod_template_label)
    if args.pod_template_annotation:
        body["podTemplateAnnotations"] = _pairs(
            "--pod-template-annotation", args.pod_template_annotation
        )
    return body


def run_create(args: argparse.Namespace, out: TextIO) -> int:
    body = job_request(args)
    context = connect(args)
    hub = HubSession(context)
    path = (
        f"{API_PREFIX}/namespaces/{quote(context.namespace, safe='')}/applicationprofiles/"
        f"{quote(args.profile, safe='')}/instantiate"
    )
    reply = hub.request("POST", path, body=body, params={"dryRun": "All"} if args.dry_run else None)
    if args.output:
        kind = reply.get("kind", "")
        write(out, render.render([reply], kind=kind, output=args.output, single=True))
    elif args.dry_run:
        write(out, f"{reply['kind'].lower()}/{reply['metadata']['name']} created (dry run)\n")
    else:
        write(out, f"workload/{reply['metadata']['name']} created\n")
    return 0


def run_create_slurm(args: argparse.Namespace, out: TextIO) -> int:
    words = list(args.argv)
    if words[:1] == ["--"]:
        words = words[1:]
    connection = [
        f"--{flag}={value}"
        for flag in ("server", "token", "context", "namespace")
        if (value := getattr(args, flag, None)) is not None
    ]
    partition = ["--partition", args.localqueue] if args.localqueue is not None else []
    argv = [*connection, "--profile", args.profile, *partition, *words]
    return load_runner("qctl.commands.slurm:run_sbatch")(argparse.Namespace(argv=argv), out)
