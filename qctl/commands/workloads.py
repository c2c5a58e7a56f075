"""`qctl submit` and `qctl logs`: what researchers type most.

    qctl submit -f job.yaml [--cluster-set gpu] [--queue q] [--wait] [--follow]
    qctl logs [-f] WORKLOAD [--since 5m] [--tail 100] [--timestamps] [--pod P] [--container C]

`submit` sends each document (batch/v1 Job, JobSet, Pod, Workload) to the hub, which answers
once the workload is durable. `--wait` returns when every submitted workload is admitted on a
cluster; `--follow` streams their logs from wherever they run, in one terminal, until they
finish, and exits non-zero if any failed. `logs` prefixes each line with cluster/pod/container
(coloured on a terminal).

Called by: qctl.main.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, TextIO

from api.codec import load_documents
from api.errors import ApiError
from api.v1alpha1.workload import Workload
from qctl import render
from qctl.client import HubClient
from qctl.commands.common import (
    add_connection_flags,
    format_log_record,
    parse_duration,
    run_with_client,
    use_color,
)
from qctl.config import ResolvedContext
from qctl.errors import InputError, QctlError
from qctl.files import read_manifests

__all__ = ["follow_workloads", "read_documents", "register"]

POLL_SECONDS = 0.5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = subparsers.add_parser("submit", help="submit jobs to the fleet")
    submit.add_argument(
        "-f", "--filename", action="append", dest="filenames", required=True, metavar="FILE|DIR"
    )
    submit.add_argument("--cluster-set", help="run only on clusters of this ClusterSet")
    submit.add_argument("--queue", help="the LocalQueue (default: the job's queue label)")
    submit.add_argument("--wait", action="store_true", help="return once admitted on a cluster")
    submit.add_argument(
        "--follow", action="store_true", help="stream the logs until the workloads finish"
    )
    submit.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    add_connection_flags(submit)
    submit.set_defaults(run=run_submit)

    logs = subparsers.add_parser("logs", help="logs of every pod of a workload, any cluster")
    logs.add_argument("workload")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument("--since", help="only lines newer than this, e.g. 5m")
    logs.add_argument("--tail", type=int, help="the last N lines of each container")
    logs.add_argument("--timestamps", action="store_true")
    logs.add_argument("--pod")
    logs.add_argument("--container")
    logs.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    add_connection_flags(logs)
    logs.set_defaults(run=run_logs)


def read_documents(filenames: list[str]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for source, text in read_manifests(filenames):
        try:
            docs += [d.body for d in load_documents(text)]
        except ApiError as exc:
            raise InputError(f"{source}: {exc}") from exc
    if not docs:
        raise InputError("nothing to submit: the files hold no documents")
    return docs


def run_submit(args: argparse.Namespace, out: TextIO) -> int:
    docs = read_documents(args.filenames)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        names: list[str] = []
        for body in docs:
            ns = (body.get("metadata") or {}).get("namespace") or ctx.namespace
            created = await client.submit(
                body, namespace=ns, cluster_set=args.cluster_set, queue=args.queue
            )
            meta, spec = created["metadata"], created["spec"]
            names.append(f"{meta['namespace']}/{meta['name']}")
            out.write(
                f"workload/{meta['name']} submitted to queue {spec['queueName']}"
                f" in namespace {meta['namespace']}\n"
            )
            out.flush()
        if args.follow:
            return await follow_workloads(client, names, out, color=use_color(args.color, out))
        if args.wait:
            await _wait_admitted(client, names, out)
        return 0

    return run_with_client(args, work)


async def _get(client: HubClient, key: str) -> dict[str, Any]:
    ns, name = key.split("/", 1)
    return await client.get(Workload, name, ns)


async def _wait_admitted(client: HubClient, keys: list[str], out: TextIO) -> None:
    waiting = set(keys)
    while waiting:
        for key in sorted(waiting):
            wl = await _get(client, key)
            state = render.workload_state(wl)
            if state not in ("Pending", "Dispatched"):
                cluster = (wl.get("status") or {}).get("clusterName")
                out.write(f"workload/{key.split('/')[1]} {state.lower()} on cluster {cluster}\n")
                out.flush()
                waiting.discard(key)
        if waiting:
            await asyncio.sleep(POLL_SECONDS)


async def follow_workloads(client: HubClient, keys: list[str], out: TextIO, *, color: bool) -> int:
    async def one(key: str) -> str:
        ns, name = key.split("/", 1)
        async for record in client.logs(ns, name, {"follow": "true"}):
            line = format_log_record(record, color=color, timestamps=False)
            if line is not None:
                out.write(line + "\n")
                out.flush()
        # The stream ends when the pods are done; wait for the hub to record the outcome.
        while True:
            wl = await _get(client, key)
            state = render.workload_state(wl)
            if state in ("Succeeded", "Failed", "Cancelled"):
                return state
            await asyncio.sleep(POLL_SECONDS)

    results = await asyncio.gather(*(one(k) for k in keys))
    failed = 0
    for key, state in zip(keys, results, strict=True):
        out.write(f"workload/{key.split('/')[1]} {state.lower()}\n")
        failed += state != "Succeeded"
    out.flush()
    if failed:
        raise QctlError(f"{failed} of {len(keys)} workload(s) did not succeed")
    return 0


def run_logs(args: argparse.Namespace, out: TextIO) -> int:
    params: dict[str, str] = {}
    if args.follow:
        params["follow"] = "true"
    if args.since:
        params["sinceSeconds"] = str(parse_duration(args.since))
    if args.tail is not None:
        params["tailLines"] = str(args.tail)
    if args.pod:
        params["pod"] = args.pod
    if args.container:
        params["container"] = args.container
    color = use_color(args.color, out)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        name = args.workload.split("/", 1)[-1]
        async for record in client.logs(ctx.namespace, name, params):
            line = format_log_record(record, color=color, timestamps=args.timestamps)
            if line is not None:
                out.write(line + "\n")
                out.flush()
        return 0

    return run_with_client(args, work)
