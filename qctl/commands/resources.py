"""`qctl get`, `qctl describe` and `qctl delete`: the hub's objects, kubectl style.

    qctl get workloads|clusters|queues|clustersets|cq|lq|… [NAME] [-o table|wide|json|yaml]
             [-w] [-A] [-l SELECTOR] [--kueue [v1beta2|v1beta1]]
    qctl describe workload NAME      state, cluster, pending reasons per cluster, timeline
    qctl delete workload NAME        (cancels it on its cluster)

One request each, over qctl.rest; `get -w` goes on to stream changes (qctl.commands.streams,
loaded only then). Called by: qctl.main (through qctl.cli), qctl.commands.streams.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO

from qctl import render
from qctl.cli import load_runner
from qctl.commands.common import connect
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.kinds import ServedKind, resolve_kind
from qctl.rest import HubSession

__all__ = ["describe_workload", "print_listing", "run_delete", "run_describe", "run_get"]


def run_get(args: argparse.Namespace, out: TextIO) -> int:
    if args.kueue and (args.output not in ("yaml", "json") or args.watch):
        raise UsageError("--kueue writes objects once: use it with -o yaml or -o json, not -w")
    if args.watch:
        return load_runner("qctl.commands.streams:run_get_watch")(args, out)
    kind = resolve_kind(args.type)
    context = connect(args)
    hub = HubSession(context)
    if args.name:
        items = [hub.get(kind, args.name, context.namespace)]
    else:
        items = hub.list(
            kind,
            context.namespace,
            all_namespaces=args.all_namespaces,
            label_selector=args.selector,
        )
    if args.kueue:
        items = _as_kueue(items, args.kueue)
    print_listing(args, kind, context.namespace, items, out)
    return 0


def _as_kueue(items: Sequence[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """The objects as Kueue's (api.kueue; it imports the models, so only for --kueue)."""
    from api.errors import ObjectInvalidError  # noqa: PLC0415
    from api.kueue import to_kueue  # noqa: PLC0415

    try:
        return [to_kueue(item, version) for item in items]
    except ObjectInvalidError as exc:
        raise QctlError(f"no Kueue form: {exc}") from exc


def print_listing(
    args: argparse.Namespace,
    kind: ServedKind,
    namespace: str,
    items: Sequence[dict[str, Any]],
    out: TextIO,
) -> None:
    """What `get` prints of the objects it fetched, before any watch."""
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
        where = "" if not kind.NAMESPACED or args.all_namespaces else f" in namespace {namespace}"
        out.write(f"No {kind.plural()} found{where}.\n")
    out.flush()


def run_delete(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind(args.type)
    context = connect(args)
    HubSession(context).delete(kind, args.name, context.namespace)
    out.write(f"{kind.KIND.lower()}/{args.name} deleted\n")
    return 0


def run_describe(args: argparse.Namespace, out: TextIO) -> int:
    kind = resolve_kind(args.type)
    context = connect(args)
    hub = HubSession(context)
    obj = hub.get(kind, args.name, context.namespace)
    if kind.KIND == "Workload":
        try:
            tenants = hub.list(resolve_kind("tenants"), None, all_namespaces=True)
        except HubRequestError:  # a user who may not read tenants sees no factor
            tenants = []
        out.write(describe_workload(obj, fair_share=fair_share_of(obj, tenants)))
    else:
        out.write(render.render([obj], kind=kind.KIND, output="yaml", single=True))
    return 0


def fair_share_of(wl: dict[str, Any], tenants: Sequence[dict[str, Any]]) -> str | None:
    """`vision/alice: factor 0.8` — the workload's tenant and submitter, and their factor in
    the fleet's Fair Tree as the tenant's status last showed it (None: no tenant owns the
    namespace)."""
    meta = wl.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    user = (meta.get("annotations") or {}).get("multiq.dev/submitted-by", "")
    for tenant in sorted(tenants, key=lambda t: t.get("metadata", {}).get("name", "")):
        if namespace not in (tenant.get("spec", {}).get("namespaces") or []):
            continue
        name = tenant["metadata"]["name"]
        share = (tenant.get("status") or {}).get("fairShare") or {}
        for row in share.get("users", []):
            if row.get("name", "") == user:
                return f"{name}/{user or '(unknown)'}: factor {row.get('factor', 0)}"
        return f"{name}/{user or '(unknown)'}: factor 1 (no usage yet)"
    return None


def describe_workload(wl: dict[str, Any], *, fair_share: str | None = None) -> str:
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
    if fair_share is not None:
        lines.append(f"Fair share:    {fair_share}")
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
