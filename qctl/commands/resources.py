"""`qctl get`, `qctl describe`, `qctl delete` and `qctl apply`: the hub's objects, kubectl style.

    qctl get workloads|clusters|queues|clustersets|cq|lq|… [NAME] [-o table|wide|json|yaml]
             [-w] [-A] [-l SELECTOR]
    qctl describe workload NAME      state, cluster, pending reasons per cluster, timeline
    qctl delete workload NAME        (cancels it on its cluster)
    qctl apply -f FILE|DIR           create or update queues, flavors, clusters, …

Called by: qctl.main.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from api.codec import decode, load_documents
from api.errors import ApiError, ObjectInvalidError
from api.kinds import REGISTRY
from api.meta import Object
from qctl import render
from qctl.client import HubClient, HubRequestError
from qctl.commands.common import add_connection_flags, run_with_client
from qctl.config import ResolvedContext
from qctl.errors import QctlError, UsageError
from qctl.files import read_manifests
from qctl.kinds import resolve_kind

__all__ = ["register"]

OUTPUTS = ("table", "wide", "json", "yaml")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    get = subparsers.add_parser("get", help="list or show objects of one type")
    get.add_argument("type", help="workloads, clusters, queues, clustersets, cq, lq, rf, …")
    get.add_argument("name", nargs="?")
    get.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    get.add_argument("-w", "--watch", action="store_true", help="stream changes")
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument("-l", "--selector", help="label selector, e.g. team=vision")
    add_connection_flags(get)
    get.set_defaults(run=run_get)

    describe = subparsers.add_parser("describe", help="show one object in detail, with reasons")
    describe.add_argument("type")
    describe.add_argument("name")
    add_connection_flags(describe)
    describe.set_defaults(run=run_describe)

    delete = subparsers.add_parser("delete", help="delete an object (a workload is cancelled)")
    delete.add_argument("type")
    delete.add_argument("name")
    add_connection_flags(delete)
    delete.set_defaults(run=run_delete)

    apply = subparsers.add_parser("apply", help="create or update objects from files")
    apply.add_argument(
        "-f", "--filename", action="append", dest="filenames", required=True, metavar="FILE|DIR"
    )
    add_connection_flags(apply)
    apply.set_defaults(run=run_apply)


def run_get(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind(args.type)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        ns = ctx.namespace
        if args.name:
            items = [await client.get(kind, args.name, ns)]
        else:
            items = await client.list(
                kind, ns, all_namespaces=args.all_namespaces, label_selector=args.selector
            )
        out.write(
            render.render(
                items,
                kind=kind.KIND,
                output=args.output,
                namespaced=kind.NAMESPACED,
                all_namespaces=args.all_namespaces,
                single=bool(args.name),
            )
        )
        if not items and args.output in ("table", "wide") and not args.watch:
            where = "" if not kind.NAMESPACED or args.all_namespaces else f" in namespace {ns}"
            out.write(f"No {kind.plural()} found{where}.\n")
        out.flush()
        if args.watch:
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


def run_delete(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind(args.type)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        await client.delete(kind, args.name, ctx.namespace)
        out.write(f"{kind.KIND.lower()}/{args.name} deleted\n")
        return 0

    return run_with_client(args, work)


def _decode_all(filenames: list[str]) -> list[Object]:
    objects: list[Object] = []
    problems: list[str] = []
    for source, text in read_manifests(filenames):
        try:
            docs = load_documents(text)
        except ApiError as exc:
            problems.append(f"{source}: {exc}")
            continue
        for doc in docs:
            try:
                objects.append(decode(doc.body, REGISTRY))
            except ObjectInvalidError as exc:
                problems += [f"{source}: document {doc.index}: {e}" for e in exc.errors]
            except ApiError as exc:
                problems.append(f"{source}: document {doc.index}: {exc}")
    if problems:
        raise QctlError("nothing applied; fix these first:\n  " + "\n  ".join(problems))
    return objects


def run_apply(args: argparse.Namespace, out: TextIO) -> int:
    objects = _decode_all(args.filenames)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        for obj in objects:
            kind = type(obj)
            if not kind.API_VERSION.startswith("multiq.dev/") or kind.KIND == "Workload":
                raise UsageError(
                    f"{kind.KIND} {obj.name!r}: apply manages queues, flavors and clusters; "
                    "submit jobs with `qctl submit -f`"
                )
            body = obj.to_wire()
            if kind.NAMESPACED:
                body.setdefault("metadata", {}).setdefault("namespace", ctx.namespace)
            label = f"{kind.KIND.lower()}/{obj.name}"
            try:
                await client.create(kind, body)
                out.write(f"{label} created\n")
                continue
            except HubRequestError as exc:
                if exc.reason != "AlreadyExists":
                    raise
            current = await client.get(kind, obj.name, body["metadata"].get("namespace"))
            if _same(current, body):
                out.write(f"{label} unchanged\n")
                continue
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await client.replace(kind, body)
            out.write(f"{label} configured\n")
        return 0

    return run_with_client(args, work)


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    meta_keys = ("labels", "annotations")
    cur_meta, want_meta = current.get("metadata", {}), wanted.get("metadata", {})
    return all(cur_meta.get(k) == want_meta.get(k) for k in meta_keys) and all(
        current.get(k) == wanted.get(k) for k in wanted if k not in ("metadata", "status")
    )


def run_describe(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind(args.type)

    async def work(client: HubClient, ctx: ResolvedContext) -> int:
        obj = await client.get(kind, args.name, ctx.namespace)
        if kind.KIND == "Workload":
            out.write(describe_workload(obj))
        else:
            out.write(render.render([obj], kind=kind.KIND, output="yaml", single=True))
        return 0

    return run_with_client(args, work)


def describe_workload(wl: dict[str, Any]) -> str:
    meta, spec, status = wl.get("metadata", {}), wl.get("spec", {}), wl.get("status") or {}
    created = meta.get("creationTimestamp")
    lines = [
        f"Name:          {meta.get('name')}",
        f"Namespace:     {meta.get('namespace')}",
        f"Queue:         {spec.get('queueName')}",
        f"Priority:      {spec.get('priority', 0)}"
        + (f" ({spec['priorityClassName']})" if spec.get("priorityClassName") else ""),
        f"State:         {render.workload_state(wl)}",
        f"Cluster:       {status.get('clusterName') or '<none>'}",
        f"Generation:    {status.get('dispatchGeneration', 0)} (dispatch)",
        f"Created:       {created} ({render.age(created)} ago)",
    ]
    annotations = meta.get("annotations") or {}
    if "multiq.dev/cluster-set" in annotations:
        lines.append(f"Cluster set:   {annotations['multiq.dev/cluster-set']}")
    lines.append("Pod sets:")
    for ps in spec.get("podSets", []):
        requests: dict[str, str] = {}
        for container in ps.get("template", {}).get("spec", {}).get("containers", []):
            requests.update(container.get("resources", {}).get("requests", {}))
        shown = ", ".join(f"{k}={v}" for k, v in sorted(requests.items())) or "no requests"
        count = f"{ps.get('count', 1)}" + (f" (min {ps['minCount']})" if ps.get("minCount") else "")
        lines.append(f"  {ps.get('name', 'main')}: {count} pod(s), each {shown}")
    pods = status.get("pods")
    if pods:
        lines.append(
            "Pods:          " + ", ".join(f"{v} {k}" for k, v in pods.items() if v)
            if any(pods.values())
            else "Pods:          none yet"
        )
    admission = status.get("admission")
    if admission:
        lines.append(f"Admission:     ClusterQueue {admission.get('clusterQueue')}")
        for psa in admission.get("podSetAssignments", []):
            flavors = ", ".join(f"{r}: {f}" for r, f in sorted(psa.get("flavors", {}).items()))
            lines.append(f"  {psa.get('name', 'main')}: {flavors or '-'}")
    reasons = status.get("clusterPendingReasons") or []
    if reasons:
        lines.append("Per cluster:")
        for r in reasons:
            msg = f": {r['message']}" if r.get("message") else ""
            lines.append(f"  {r['cluster']:<12} {r['reason']}{msg}")
    conditions = sorted(
        status.get("conditions") or [], key=lambda c: c.get("lastTransitionTime") or ""
    )
    if conditions:
        lines.append("Timeline:")
        for c in conditions:
            when = c.get("lastTransitionTime") or ""
            msg = f" - {c['message']}" if c.get("message") else ""
            lines.append(f"  {when:<26} {c['type']}={c['status']} {c.get('reason', '')}{msg}")
    return "\n".join(lines) + "\n"
