"""The commands that hold a connection to the hub open, over the aiohttp client:
`qctl logs`, `qctl get -w` and `qctl submit --follow`; and following workloads' logs to
their end, which `qctl dev demo` shares.

    qctl logs [-f] WORKLOAD… | -l SELECTOR [--prefix] [--since 5m] [--tail 100] [--timestamps]
              [--pod P] [--container C]

`logs` prefixes each line with cluster/pod/container — with several workloads (or -l, or
--prefix) with [workload/pod/container], their lines interleaved as they arrive — coloured on
a terminal, each prefix its own colour; what a reader missed (it read too slowly, lines never
read from the cluster, lines over the agent's ship limit) is a line of its own saying how
many and why. Only these
commands import aiohttp; the one-shot ones use qctl.rest.

Called by: qctl.main (through qctl.cli), qctl.commands.resources (get -w),
qctl.commands.submit (--follow), qctl.commands.dev (demo).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TextIO, TypeVar

from qctl import render
from qctl.client import HubClient
from qctl.commands.common import connect, parse_duration, use_color
from qctl.commands.resources import print_listing
from qctl.commands.submit import POLL_SECONDS, submit_files
from qctl.config import ResolvedContext
from qctl.errors import QctlError
from qctl.kinds import WORKLOAD, resolve_kind

__all__ = [
    "follow_workloads",
    "format_log_record",
    "run_get_watch",
    "run_logs",
    "run_submit_follow",
    "run_with_client",
]

T = TypeVar("T")

_COLORS = (31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96)


def _color_for(text: str) -> int:
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return _COLORS[digest[0] % len(_COLORS)]


def format_log_record(
    record: Mapping[str, Any],
    *,
    color: bool,
    timestamps: bool,
    prefix: bool = True,
    workload: str | None = None,
) -> str | None:
    """One printable line for a hub log record, or None for records that are not lines.
    With `workload` the prefix is `[workload/pod/container]` (as `kubectl logs --prefix`),
    else `cluster/pod/container`."""
    if "line" not in record:
        event = record.get("event")
        if event in ("dropped", "note") and record.get("message"):
            return str(record["message"])
        if event == "dropped":
            return (
                f"[{record.get('cluster')}] … {record.get('count')} line(s) dropped (slow reader)"
            )
        if event == "lost":
            return f"[{record.get('cluster')}] {record.get('message')}"
        return None
    head = ""
    if prefix:
        if workload is not None:
            label = f"[{workload}/{record.get('pod')}/{record.get('container')}]"
        else:
            label = f"{record.get('cluster')}/{record.get('pod')}/{record.get('container')}"
        head = f"\x1b[{_color_for(label)}m{label}\x1b[0m " if color else f"{label} "
    stamp = f"{record['time']} " if timestamps and record.get("time") else ""
    return f"{head}{stamp}{record['line']}"


def run_with_client(
    args: argparse.Namespace, work: Callable[[HubClient, ResolvedContext], Awaitable[T]]
) -> T:
    context = connect(args)

    async def main() -> T:
        async with HubClient(context) as client:
            return await work(client, context)

    return asyncio.run(main())


def run_get_watch(args: argparse.Namespace, out: TextIO) -> int:
    """`qctl get -w`: what `get` prints, then a line (or document) per change."""
    kind = resolve_kind(args.type)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        ns = ctx.namespace
        if args.name:
            items = [await client.get(kind, args.name, ns)]
        else:
            items = await client.list(
                kind, ns, all_namespaces=args.all_namespaces, label_selector=args.selector
            )
        print_listing(args, kind, ns, items, out)
        columns = render.columns_for(
            kind.KIND,
            namespaced=kind.NAMESPACED,
            all_namespaces=args.all_namespaces,
            wide=args.output == "wide",
        )
        async for event in client.watch(kind, ns, all_namespaces=args.all_namespaces):
            obj = event.get("object", {})
            if args.name and obj.get("metadata", {}).get("name") != args.name:
                continue
            if args.output in ("json", "yaml"):
                out.write(render.render([obj], kind=kind.KIND, output=args.output, single=True))
            else:
                table = render.render_table([obj], columns).splitlines()[1]
                out.write(table + "\n")
            out.flush()
        return 0

    return run_with_client(args, work)


def run_submit_follow(args: argparse.Namespace, out: TextIO) -> int:
    """`qctl submit --follow`: submit, then stream the workloads' logs until they finish."""
    _, names = submit_files(args, out)
    color = use_color(args.color, out)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        return await follow_workloads(client, names, out, color=color)

    return run_with_client(args, work)


async def _get(client: HubClient, key: str) -> dict[str, Any]:
    ns, name = key.split("/", 1)
    return await client.get(WORKLOAD, name, ns)


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
    """`qctl logs`: one workload's lines as they come, or several workloads' (named, or
    chosen with -l) interleaved as they arrive, each line prefixed [workload/pod/container]."""
    if not args.workloads and not args.selector:
        raise QctlError("name a workload (or several), or choose them with -l SELECTOR")
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
        names = [w.split("/", 1)[-1] for w in args.workloads]
        if args.selector:
            items = await client.list(WORKLOAD, ctx.namespace, label_selector=args.selector)
            names += [
                str(i["metadata"]["name"]) for i in items if i["metadata"]["name"] not in names
            ]
            if not names:
                raise QctlError(f"no workload in namespace {ctx.namespace} matches {args.selector}")
        several = args.prefix if args.prefix is not None else len(names) > 1 or bool(args.selector)

        async def one(name: str) -> None:
            async for record in client.logs(ctx.namespace, name, params):
                line = format_log_record(
                    record,
                    color=color,
                    timestamps=args.timestamps,
                    workload=name if several else None,
                )
                if line is not None:
                    out.write(line + "\n")
                    out.flush()

        await asyncio.gather(*(one(name) for name in names))
        return 0

    return run_with_client(args, work)
