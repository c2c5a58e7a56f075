"""How qctl prints objects: kubectl-like tables (columns are data, per kind), wide tables,
JSON and YAML. Works on wire dicts so it prints whatever the hub returns.

Called by: qctl get / describe / submit.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

__all__ = ["Column", "age", "columns_for", "render", "render_table"]

Wire = Mapping[str, Any]


class Column(NamedTuple):
    header: str
    value: Callable[[Wire], str]
    wide_only: bool = False


def _get(obj: Wire, *path: str | int, default: Any = None) -> Any:
    node: Any = obj
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, list) or len(node) <= part:
                return default
            node = node[part]
        else:
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
    return node


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """Kubernetes-style age: 45s, 12m, 3h4m, 2d3h."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 24:
        return f"{hours}h{minutes % 60}m" if hours < 8 and minutes % 60 else f"{hours}h"
    return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"


def _name(obj: Wire) -> str:
    return str(_get(obj, "metadata", "name", default=""))


def _age(obj: Wire) -> str:
    return age(_get(obj, "metadata", "creationTimestamp"))


def _condition(obj: Wire, kind: str) -> Wire | None:
    for cond in _get(obj, "status", "conditions", default=[]) or []:
        if cond.get("type") == kind:
            return cond  # type: ignore[no-any-return]
    return None


def workload_state(obj: Wire) -> str:
    """One word for where a workload is: Pending, Dispatched, Admitted, Running, Finished…,
    Stopped (a user stopped it: spec.active=false)."""
    finished = _condition(obj, "Finished")
    if finished and finished.get("status") == "True":
        return str(finished.get("reason") or "Finished")
    if _get(obj, "spec", "active") is False:
        return "Stopped"
    evicted = _condition(obj, "Evicted")
    if evicted and evicted.get("status") == "True":
        return "Evicted"
    if _get(obj, "status", "pods", "running", default=0):
        return "Running"
    admitted = _condition(obj, "Admitted")
    if admitted and admitted.get("status") == "True":
        return "Admitted"
    if _get(obj, "status", "clusterName"):
        return "Dispatched"
    return "Pending"


def _pending_reason(obj: Wire) -> str:
    reserved = _condition(obj, "QuotaReserved")
    if reserved and reserved.get("status") == "False":
        return str(reserved.get("message") or reserved.get("reason") or "")
    return ""


_WORKLOAD = (
    Column("NAME", _name),
    Column("QUEUE", lambda o: str(_get(o, "spec", "queueName", default=""))),
    Column("STATE", workload_state),
    Column("CLUSTER", lambda o: str(_get(o, "status", "clusterName", default="") or "-")),
    Column("PRIORITY", lambda o: str(_get(o, "spec", "priority", default=0)), wide_only=True),
    Column("REASON", _pending_reason, wide_only=True),
    Column("AGE", _age),
)

_CLUSTER = (
    Column("NAME", _name),
    Column("CONNECTED", lambda o: str(bool(_get(o, "status", "connected"))).lower()),
    Column(
        "NODES",
        lambda o: (
            f"{_get(o, 'status', 'capacity', 'readyNodes', default=0)}/"
            f"{_get(o, 'status', 'capacity', 'nodes', default=0)}"
        ),
    ),
    Column("AGENT", lambda o: str(_get(o, "status", "agentVersion", default="") or "-")),
    Column("CORDONED", lambda o: str(bool(_get(o, "spec", "cordoned"))).lower(), wide_only=True),
    Column(
        "LOST-SINCE",
        lambda o: age(_get(o, "status", "lostSince")) if _get(o, "status", "lostSince") else "-",
        wide_only=True,
    ),
    Column("AGE", _age),
)

_GLOBAL_QUEUE = (
    Column("NAME", _name),
    Column("CLUSTER-SET", lambda o: str(_get(o, "spec", "clusterSet", default=""))),
    Column("POLICY", lambda o: str(_get(o, "spec", "dispatchPolicy", "type", default="BestFit"))),
    Column("PENDING", lambda o: str(_get(o, "status", "pendingWorkloads", default=0))),
    Column("DISPATCHED", lambda o: str(_get(o, "status", "dispatchedWorkloads", default=0))),
    Column("RUNNING", lambda o: str(_get(o, "status", "runningWorkloads", default=0))),
    Column(
        "FLEET-USAGE",
        lambda o: _usage_against_quota(
            _get(o, "status", "fleetUsage", default={}) or {},
            _get(o, "spec", "fleetQuota", default={}) or {},
        ),
        wide_only=True,
    ),
    Column("AGE", _age),
)


def _usage_against_quota(usage: dict[str, str], quota: dict[str, str]) -> str:
    """cpu=40/512,nvidia.com/gpu=8/64: what is used of each resource, and of its quota."""
    parts = []
    for resource in sorted(set(usage) | set(quota)):
        used = usage.get(resource, "0")
        parts.append(
            f"{resource}={used}/{quota[resource]}" if resource in quota else f"{resource}={used}"
        )
    return ",".join(parts) or "<none>"


_CLUSTER_SET = (
    Column("NAME", _name),
    Column(
        "CLUSTERS",
        lambda o: (
            ",".join(_get(o, "status", "clusters", default=[]) or [])
            or ",".join(_get(o, "spec", "clusters", default=[]) or [])
            or "<selector>"
        ),
    ),
    Column("CONNECTED", lambda o: str(_get(o, "status", "connectedClusters", default=0))),
    Column("AGE", _age),
)

_CLUSTER_QUEUE = (
    Column("NAME", _name),
    Column("COHORT", lambda o: str(_get(o, "spec", "cohortName", default="") or "-")),
    Column(
        "STRATEGY", lambda o: str(_get(o, "spec", "queueingStrategy", default="")), wide_only=True
    ),
    Column("PENDING", lambda o: str(_get(o, "status", "pendingWorkloads", default=0))),
    Column("ADMITTED", lambda o: str(_get(o, "status", "admittedWorkloads", default=0))),
    Column(
        "WEIGHTED-SHARE",
        lambda o: str(_get(o, "status", "fairSharing", "weightedShare", default="-")),
        wide_only=True,
    ),
    Column("AGE", _age),
)


def _fair_usage(obj: Wire) -> str:
    """Admission fair sharing: the local queue's decayed usage (`cpu=9844m,memory=1Gi`)."""
    used = _get(
        obj, "status", "fairSharing", "admissionFairSharingStatus", "consumedResources", default={}
    )
    return ",".join(f"{k}={v}" for k, v in sorted((used or {}).items())) or "<none>"


_LOCAL_QUEUE = (
    Column("NAME", _name),
    Column("CLUSTERQUEUE", lambda o: str(_get(o, "spec", "clusterQueue", default=""))),
    Column("PENDING", lambda o: str(_get(o, "status", "pendingWorkloads", default=0))),
    Column("ADMITTED", lambda o: str(_get(o, "status", "admittedWorkloads", default=0))),
    Column("FAIR-USAGE", _fair_usage, wide_only=True),
    Column("AGE", _age),
)


def _number(value: Any) -> str:
    """A fair-share figure as sshare prints it; LevelFS absent means infinite (no usage)."""
    if value is None:
        return "inf"
    return f"{float(value):.6g}"


def fair_share_rows(tenants: Sequence[Wire]) -> list[Wire]:
    """`sshare -l` rows: each tenant, then each GlobalQueue its work goes through (a
    sub-account: a row of its own, named in the QUEUE column) followed by that queue's users,
    in the Fair Tree's order (the hub's status keeps them visited first to last). A tenant
    whose only queue is "" (no GlobalQueue governs its work) shows its users straight under
    it, as before queues were kept."""
    rows: list[Wire] = []
    for tenant in tenants:
        share = _get(tenant, "status", "fairShare", default=None) or {}
        name = _name(tenant)
        rows.append(
            {
                "tenant": name,
                "queue": "",
                "user": "",
                "shares": str(_get(tenant, "spec", "fairSharingWeight", default="1")),
                "norm": _number(share.get("normShares", 0)) if share else "-",
                "usage": _number(share.get("rawUsage", 0)) if share else "-",
                "effective": _number(share.get("effectiveUsage", 0)) if share else "-",
                "factor": "",
                "level": _number(share.get("levelFs")) if share else "-",
            }
        )
        queues = share.get("queues") or []
        users = share.get("users", [])
        if [q.get("name", "") for q in queues] in ([], [""]):
            rows += [_user_row(name, user) for user in users]
            continue
        for queue in queues:
            queue_name = str(queue.get("name", ""))
            rows.append(
                {
                    "tenant": name,
                    "queue": queue_name or "(none)",
                    "user": "",
                    "shares": _number(queue.get("rawShares", 0)),
                    "norm": _number(queue.get("normShares", 0)),
                    "usage": _number(queue.get("rawUsage", 0)),
                    "effective": _number(queue.get("effectiveUsage", 0)),
                    "factor": "",
                    "level": _number(queue.get("levelFs")),
                }
            )
            rows += [_user_row(name, u) for u in users if u.get("queue", "") == queue_name]
    return rows


def _user_row(tenant: str, user: Wire) -> Wire:
    queue = str(user.get("queue", ""))
    return {
        "tenant": tenant,
        "queue": queue,
        "user": str(user.get("name") or "(unknown)"),
        "shares": "1",
        "norm": "",
        "usage": _number(user.get("rawUsage", 0)),
        "effective": _number(user.get("effectiveUsage", 0)),
        "factor": _number(user.get("factor", 0)),
        "level": _number(user.get("levelFs")),
    }


def _field(key: str) -> Callable[[Wire], str]:
    return lambda row: str(row.get(key, ""))


_TENANT = (
    Column("TENANT", _field("tenant")),
    Column("QUEUE", _field("queue")),
    Column("USER", _field("user")),
    Column("SHARES", _field("shares")),
    Column("NORM-SHARES", _field("norm")),
    Column("RAW-USAGE", _field("usage")),
    Column("EFFECTIVE-USAGE", _field("effective")),
    Column("FAIRSHARE", _field("factor")),
    Column("LEVEL-FS", _field("level")),
)

_DEFAULT = (Column("NAME", _name), Column("AGE", _age))

_COLUMNS: dict[str, Sequence[Column]] = {
    "Workload": _WORKLOAD,
    "MemberCluster": _CLUSTER,
    "GlobalQueue": _GLOBAL_QUEUE,
    "ClusterSet": _CLUSTER_SET,
    "ClusterQueue": _CLUSTER_QUEUE,
    "LocalQueue": _LOCAL_QUEUE,
    "Tenant": _TENANT,
}


def columns_for(kind: str, *, namespaced: bool, all_namespaces: bool, wide: bool) -> list[Column]:
    cols = [c for c in _COLUMNS.get(kind, _DEFAULT) if wide or not c.wide_only]
    if namespaced and all_namespaces:
        cols.insert(
            0, Column("NAMESPACE", lambda o: str(_get(o, "metadata", "namespace", default="")))
        )
    return cols


def render_table(items: Sequence[Wire], columns: Sequence[Column]) -> str:
    rows = [[c.header for c in columns]] + [[c.value(item) for c in columns] for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + "\n"


def render(
    items: Sequence[Wire],
    *,
    kind: str,
    output: str,
    namespaced: bool = False,
    all_namespaces: bool = False,
    single: bool = False,
) -> str:
    if output == "json":
        if single and len(items) == 1:
            return json.dumps(items[0], indent=2) + "\n"
        return (
            json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}, indent=2) + "\n"
        )
    if output == "yaml":
        # Only -o yaml needs yaml: `qctl get` starts faster without it.
        import yaml  # noqa: PLC0415

        if single and len(items) == 1:
            return str(yaml.safe_dump(dict(items[0]), sort_keys=False))
        return str(
            yaml.safe_dump(
                {"apiVersion": "v1", "kind": "List", "items": [dict(i) for i in items]},
                sort_keys=False,
            )
        )
    if not items:
        return ""
    cols = columns_for(
        kind, namespaced=namespaced, all_namespaces=all_namespaces, wide=output == "wide"
    )
    if kind == "Tenant":
        items = fair_share_rows(items)
    return render_table(items, cols)
