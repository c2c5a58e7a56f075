"""`qctl get`, `qctl describe` and `qctl delete`: the hub's objects, kubectl style.

    qctl get workloads|clusters|queues|clustersets|cq|lq|… [NAME] [-o table|wide|json|yaml]
             [-w] [-A] [-l SELECTOR] [--kueue [v1beta2|v1beta1]]
    qctl describe workload NAME      state, cluster, pending reasons per cluster, timeline
    qctl delete workload NAME        (cancels it on its cluster)
    qctl list clusterqueue|localqueue|workload|resourceflavor [-A] [-l SELECTOR]
             [-c CLUSTERQUEUE] [-q LOCALQUEUE] [--status pending|admitted|finished|stopped]
    qctl list pods --for workload/NAME

`list` is kueuectl's: `get` with its filters (applied here, on what the hub lists) and its
columns (a workload's job type and name, local and cluster queue, status, execution time).
The hub knows a workload's pods by count, not by name: `list pods` prints the counts.

One request each, over qctl.rest; `get -w` goes on to stream changes (qctl.commands.streams,
loaded only then). Called by: qctl.main (through qctl.cli), qctl.commands.streams.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from qctl import render
from qctl.cli import load_runner
from qctl.commands.common import connect
from qctl.errors import HubRequestError, QctlError, UsageError
from qctl.kinds import WORKLOAD, ServedKind, resolve_kind
from qctl.rest import HubSession

__all__ = [
    "describe_workload",
    "list_columns",
    "print_listing",
    "run_delete",
    "run_describe",
    "run_get",
    "run_list",
    "workload_status",
]


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


# --- list (kueuectl's) ---------------------------------------------------------------------------

Wire = Mapping[str, Any]


def _condition_true(obj: Wire, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _condition_time(obj: Wire, kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "") or None
    return None


def workload_status(wl: Wire) -> str:
    """kueuectl's STATUS of a workload — PENDING, ADMITTED, FINISHED — and STOPPED for one a
    user stopped (spec.active=false) that has not finished."""
    if _condition_true(wl, "Finished"):
        return "FINISHED"
    if (wl.get("spec") or {}).get("active") is False:
        return "STOPPED"
    if _condition_true(wl, "Admitted"):
        return "ADMITTED"
    return "PENDING"


def _cluster_queue_of(wl: Wire) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _exec_time(wl: Wire) -> str:
    """How long it has run: from admission to its end (or now)."""
    admitted = _condition_time(wl, "Admitted")
    if not admitted:
        return ""
    finished = _condition_time(wl, "Finished")
    if finished is None:
        return render.age(admitted)
    from datetime import datetime  # noqa: PLC0415 - only finished workloads need it

    return render.age(admitted, datetime.fromisoformat(finished.replace("Z", "+00:00")))


def _annotation(obj: Wire, key: str) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key) or "")


def _spec(obj: Wire, *path: str) -> str:
    value: Any = obj.get("spec") or {}
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _status_count(obj: Wire, key: str) -> str:
    return str((obj.get("status") or {}).get(key, 0))


def _cluster_queue_active(cq: Wire) -> str:
    stopped = _spec(cq, "stopPolicy") not in ("", "None")
    conditions = (cq.get("status") or {}).get("conditions") or []
    inactive = any(c.get("type") == "Active" and c.get("status") == "False" for c in conditions)
    return "false" if stopped or inactive else "true"


def _node_labels(rf: Wire) -> str:
    labels = (rf.get("spec") or {}).get("nodeLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def _age(obj: Wire) -> str:
    return render.age((obj.get("metadata") or {}).get("creationTimestamp"))


def _name(obj: Wire) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


_LIST_COLUMNS: dict[str, tuple[render.Column, ...]] = {
    "ClusterQueue": (
        render.Column("NAME", _name),
        render.Column("COHORT", lambda o: _spec(o, "cohortName")),
        render.Column("PENDING WORKLOADS", lambda o: _status_count(o, "pendingWorkloads")),
        render.Column("ADMITTED WORKLOADS", lambda o: _status_count(o, "admittedWorkloads")),
        render.Column("ACTIVE", _cluster_queue_active),
        render.Column("AGE", _age),
    ),
    "LocalQueue": (
        render.Column("NAME", _name),
        render.Column("CLUSTERQUEUE", lambda o: _spec(o, "clusterQueue")),
        render.Column("PENDING WORKLOADS", lambda o: _status_count(o, "pendingWorkloads")),
        render.Column("ADMITTED WORKLOADS", lambda o: _status_count(o, "admittedWorkloads")),
        render.Column("AGE", _age),
    ),
    "Workload": (
        render.Column("NAME", _name),
        render.Column("JOB TYPE", lambda o: _annotation(o, "multiq.dev/source-kind")),
        render.Column("JOB NAME", lambda o: _annotation(o, "multiq.dev/source-name")),
        render.Column("LOCALQUEUE", lambda o: _spec(o, "queueName")),
        render.Column("CLUSTERQUEUE", _cluster_queue_of),
        render.Column("STATUS", workload_status),
        render.Column("CLUSTER", lambda o: str((o.get("status") or {}).get("clusterName") or "")),
        render.Column("EXEC TIME", _exec_time),
        render.Column("AGE", _age),
    ),
    "ResourceFlavor": (
        render.Column("NAME", _name),
        render.Column("NODE LABELS", _node_labels),
        render.Column("AGE", _age),
    ),
}

_POD_STATES = ("pending", "running", "ready", "succeeded", "failed")


def list_columns(kind: ServedKind, *, all_namespaces: bool) -> list[render.Column]:
    """kueuectl's columns of `list KIND` (NAMESPACE first with -A)."""
    columns = list(_LIST_COLUMNS[kind.KIND])
    if kind.NAMESPACED and all_namespaces:
        namespace = render.Column("NAMESPACE", lambda o: str(o["metadata"].get("namespace", "")))
        columns.insert(0, namespace)
    return columns


def _selected(args: argparse.Namespace, kind: ServedKind, item: Wire) -> bool:
    if kind.KIND == "LocalQueue" and args.clusterqueue:
        return _spec(item, "clusterQueue") == str(args.clusterqueue)
    if kind.KIND != "Workload":
        return True
    if args.clusterqueue and _cluster_queue_of(item) != args.clusterqueue:
        return False
    if args.localqueue and _spec(item, "queueName") != args.localqueue:
        return False
    status: str = args.status
    return status == "all" or workload_status(item) == status.upper()


def run_list(args: argparse.Namespace, out: TextIO) -> int:
    if args.kind in ("pods", "po", "pod"):
        return _list_pods(args, out)
    kind = resolve_kind({"lq": "localqueue"}.get(args.kind, args.kind))
    context = connect(args)
    all_namespaces = bool(getattr(args, "all_namespaces", False))
    items = HubSession(context).list(
        kind, context.namespace, all_namespaces=all_namespaces, label_selector=args.selector
    )
    items = [item for item in items if _selected(args, kind, item)]
    if args.output in ("json", "yaml"):
        out.write(render.render(items, kind=kind.KIND, output=args.output))
    elif items:
        out.write(render.render_table(items, list_columns(kind, all_namespaces=all_namespaces)))
    else:
        where = "" if not kind.NAMESPACED or all_namespaces else f" in {context.namespace}"
        out.write(f"No {kind.plural()} found{where}.\n")
    return 0


def _list_pods(args: argparse.Namespace, out: TextIO) -> int:
    what, _, name = args.for_object.partition("/")
    if not name or resolve_kind(what) != WORKLOAD:
        raise UsageError(f"--for: {args.for_object!r} is not workload/NAME")
    context = connect(args)
    wl = HubSession(context).get(WORKLOAD, name, context.namespace)
    status = wl.get("status") or {}
    pods = status.get("pods") or {}
    if args.output in ("json", "yaml"):
        out.write(render.render([pods], kind="Pods", output=args.output, single=True))
        return 0
    row = {"cluster": status.get("clusterName") or "<none>", **pods}
    columns = [render.Column("CLUSTER", lambda o: str(o["cluster"]))]
    columns += [render.Column(state.upper(), _count_of(state)) for state in _POD_STATES]
    out.write(render.render_table([row], columns))
    return 0


def _count_of(state: str) -> Callable[[Wire], str]:
    return lambda row: str(row.get(state, 0))


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
        queue = None
        if tenants:
            try:
                queue = global_queue_of(
                    obj,
                    tenants,
                    hub.list(resolve_kind("localqueues"), obj["metadata"].get("namespace")),
                    hub.list(resolve_kind("globalqueues"), None, all_namespaces=True),
                )
            except HubRequestError:  # then the factor is told by the submitter alone
                queue = None
        out.write(describe_workload(obj, fair_share=fair_share_of(obj, tenants, queue=queue)))
    else:
        out.write(render.render([obj], kind=kind.KIND, output="yaml", single=True))
    return 0


def _tenant_of(wl: dict[str, Any], tenants: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    namespace = wl.get("metadata", {}).get("namespace") or "default"
    for tenant in sorted(tenants, key=lambda t: t.get("metadata", {}).get("name", "")):
        if namespace in (tenant.get("spec", {}).get("namespaces") or []):
            return tenant
    return None


def global_queue_of(
    wl: dict[str, Any],
    tenants: Sequence[dict[str, Any]],
    local_queues: Sequence[dict[str, Any]],
    global_queues: Sequence[dict[str, Any]],
) -> str | None:
    """The GlobalQueue the hub routes the workload by ("" for none), as
    hub.placement.routing's `governing_queue` chooses it (None: its local queue is not there
    to tell): of those whose cluster queues and tenants admit the workload's local queue's
    cluster queue and tenant, one naming the cluster queue before one open to all, then one
    naming a tenant, then the first by name. (qctl does not import the hub: the rule is
    kept equal by tests/qctl/test_fair_share_views.py.)"""
    meta, spec = wl.get("metadata", {}), wl.get("spec", {})
    local = next(
        (
            q
            for q in local_queues
            if q.get("metadata", {}).get("name") == spec.get("queueName")
            and q.get("metadata", {}).get("namespace") == meta.get("namespace")
        ),
        None,
    )
    if local is None:
        return None
    cluster_queue = local.get("spec", {}).get("clusterQueue")
    namespace = meta.get("namespace") or "default"
    owners = {
        t.get("metadata", {}).get("name")
        for t in tenants
        if namespace in (t.get("spec", {}).get("namespaces") or [])
    }
    best: tuple[bool, bool] | None = None
    found = ""
    for gq in sorted(global_queues, key=lambda g: g.get("metadata", {}).get("name", "")):
        gq_spec = gq.get("spec", {})
        if gq_spec.get("clusterQueues") and cluster_queue not in gq_spec["clusterQueues"]:
            continue
        if gq_spec.get("tenants") and not owners & set(gq_spec["tenants"]):
            continue
        rank = (bool(gq_spec.get("clusterQueues")), bool(gq_spec.get("tenants")))
        if best is None or rank > best:
            best, found = rank, str(gq.get("metadata", {}).get("name", ""))
    return found


def fair_share_of(
    wl: dict[str, Any], tenants: Sequence[dict[str, Any]], *, queue: str | None = None
) -> str | None:
    """`vision/gpu/alice: factor 0.8` — the workload's tenant, the GlobalQueue it goes through
    (left out when none does) and its submitter, and their factor in the fleet's Fair Tree as
    the tenant's status last showed it (None: no tenant owns the namespace). `queue` unknown
    (None): the submitter's row, if it is in one queue only."""
    tenant = _tenant_of(wl, tenants)
    if tenant is None:
        return None
    user = (wl.get("metadata", {}).get("annotations") or {}).get("multiq.dev/submitted-by", "")
    share = (tenant.get("status") or {}).get("fairShare") or {}
    rows = [row for row in share.get("users", []) if row.get("name", "") == user]
    if queue is not None:
        rows = [row for row in rows if row.get("queue", "") == queue]
    elif len(rows) > 1:
        factors = ", ".join(f"{r.get('queue') or '(none)'} {r.get('factor', 0)}" for r in rows)
        return f"{tenant['metadata']['name']}/{user or '(unknown)'}: factors {factors}"
    if rows:
        queue = rows[0].get("queue", "")
    path = "/".join(p for p in (tenant["metadata"]["name"], queue, user or "(unknown)") if p)
    if rows:
        return f"{path}: factor {rows[0].get('factor', 0)}"
    return f"{path}: factor 1 (no usage yet)"


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
