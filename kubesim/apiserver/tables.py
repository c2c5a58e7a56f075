"""Server-side `Table` rendering for `kubectl get`, with the columns real printers produce.

kubectl asks for `as=Table` and prints whatever columns the server sends; priority-1 columns
show only with `-o wide`. Each printer here mirrors the one in kube's
`pkg/printers/internalversion/printers.go` (pods, jobs, nodes, namespaces, events, ...); types
without one get NAME/AGE. Called by the list, get and watch handlers.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.objects import JsonObject, age, human_duration, now, parse_time
from kubesim.resources import ResourceType

__all__ = ["Column", "TablePrinter", "json_path", "printer_for", "render_table"]


@dataclass(frozen=True)
class Column:
    name: str
    description: str = ""
    priority: int = 0
    type: str = "string"
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


_NAME = Column("Name", "Name must be unique within a namespace.", format="name")
_AGE = Column(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)

RowFunction = Callable[[JsonObject, dt.datetime], list[Any]]


@dataclass(frozen=True)
class TablePrinter:
    columns: tuple[Column, ...]
    row: RowFunction


def _none(value: Any) -> Any:
    return value if value not in (None, "") else "<none>"


def _pod_row(pod: JsonObject, at: dt.datetime) -> list[Any]:
    spec = pod.get("spec", {})
    status = pod.get("status", {})
    meta = pod["metadata"]
    restarts = 0
    last_restart: dt.datetime | None = None
    total = len(spec.get("containers") or [])
    ready = 0
    reason = status.get("reason") or status.get("phase") or ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    initializing = False
    init_specs = spec.get("initContainers") or []
    for index, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += container.get("restartCount", 0)
        state = container.get("state", {})
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated and terminated.get("exitCode") == 0:
            continue
        if terminated:
            reason = "Init:" + (
                terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}"
            )
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        restarts = 0
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += container.get("restartCount", 0)
            finished = container.get("lastState", {}).get("terminated", {}).get("finishedAt")
            if finished:
                moment = parse_time(finished)
                last_restart = moment if last_restart is None else max(last_restart, moment)
            state = container.get("state", {})
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif "terminated" in state:
                terminated = state["terminated"]
                reason = terminated.get("reason") or (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
                )
            elif container.get("ready") and "running" in state:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = (
            f"{restarts} ({human_duration(int((at - last_restart).total_seconds()))} ago)"
        )
    cells: list[Any] = [
        meta["name"],
        f"{ready}/{total}",
        reason,
        restarts_cell,
        age(meta.get("creationTimestamp"), at=at),
    ]
    gates = spec.get("readinessGates") or []
    cells += [
        _none(status.get("podIP")),
        _none(spec.get("nodeName")),
        _none(status.get("nominatedNodeName")),
        f"0/{len(gates)}" if gates else "<none>",
    ]
    return cells


def _condition(obj: JsonObject, kind: str) -> dict[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


def _has_true(obj: JsonObject, kind: str) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def _containers_cells(containers: Sequence[JsonObject]) -> list[str]:
    return [
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
    ]


def _format_selector(selector: JsonObject | None) -> str:
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        values = ",".join(expression.get("values") or [])
        operator = expression.get("operator", "")
        if operator == "In":
            parts.append(f"{expression['key']} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{expression['key']} notin ({values})")
        elif operator == "Exists":
            parts.append(expression["key"])
        else:
            parts.append(f"!{expression['key']}")
    return ",".join(parts) or "<none>"


def _job_row(job: JsonObject, at: dt.datetime) -> list[Any]:
    spec = job.get("spec", {})
    status = job.get("status", {})
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    if status.get("startTime"):
        start = parse_time(status["startTime"])
        end = parse_time(status["completionTime"]) if status.get("completionTime") else at
        duration = human_duration(int((end - start).total_seconds()))
    if _has_true(job, "Complete"):
        state = "Complete"
    elif _has_true(job, "Failed"):
        state = "Failed"
    elif job["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    elif _has_true(job, "Suspended"):
        state = "Suspended"
    elif _has_true(job, "FailureTarget"):
        state = "FailureTarget"
    elif _has_true(job, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    return [
        job["metadata"]["name"],
        state,
        completions,
        duration,
        age(job["metadata"].get("creationTimestamp"), at=at),
        *_containers_cells(containers),
        _format_selector(spec.get("selector")),
    ]


def _node_row(node: JsonObject, at: dt.datetime) -> list[Any]:
    ready = _condition(node, "Ready")
    if ready is None:
        states = ["Unknown"]
    else:
        states = ["Ready" if ready.get("status") == "True" else "NotReady"]
    if node.get("spec", {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = node["metadata"].get("labels") or {}
    roles = sorted(
        key.split("/", 1)[1]
        for key in labels
        if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]
    )
    if labels.get("kubernetes.io/role"):
        roles.append(labels["kubernetes.io/role"])
    info = node.get("status", {}).get("nodeInfo", {})
    addresses = {
        a.get("type"): a.get("address") for a in node.get("status", {}).get("addresses") or []
    }
    return [
        node["metadata"]["name"],
        ",".join(states),
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp"), at=at),
        info.get("kubeletVersion", ""),
        _none(addresses.get("InternalIP")),
        _none(addresses.get("ExternalIP")),
        info.get("osImage", ""),
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
    ]


def _namespace_row(namespace: JsonObject, at: dt.datetime) -> list[Any]:
    return [
        namespace["metadata"]["name"],
        namespace.get("status", {}).get("phase", ""),
        age(namespace["metadata"].get("creationTimestamp"), at=at),
    ]


def _event_row(event: JsonObject, at: dt.datetime) -> list[Any]:
    involved = event.get("involvedObject", {})
    last = (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event["metadata"].get("creationTimestamp")
    )
    first = event.get("firstTimestamp") or event.get("eventTime") or last
    source = event.get("source", {})
    source_cell = source.get("component") or event.get("reportingComponent", "")
    if source.get("host"):
        source_cell = f"{source_cell}, {source['host']}"
    return [
        age(last, at=at),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        source_cell,
        event.get("message", "").strip(),
        age(first, at=at),
        event.get("count", 1),
        event["metadata"]["name"],
    ]


def _configmap_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [obj["metadata"]["name"], count, age(obj["metadata"].get("creationTimestamp"), at=at)]


def _secret_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("stringData") or {})
    return [
        obj["metadata"]["name"],
        obj.get("type", "Opaque"),
        count,
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _service_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    ports = ",".join(
        f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        if not p.get("nodePort")
        else f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    selector = spec.get("selector") or {}
    return [
        obj["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP", "<none>"),
        external,
        ports or "<none>",
        age(obj["metadata"].get("creationTimestamp"), at=at),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _lease_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    return [
        obj["metadata"]["name"],
        obj.get("spec", {}).get("holderIdentity", "<unknown>"),
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _deployment_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    return [
        obj["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        age(obj["metadata"].get("creationTimestamp"), at=at),
        *_containers_cells(containers),
        _format_selector(spec.get("selector")),
    ]


def _statefulset_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    return [
        obj["metadata"]["name"],
        f"{obj.get('status', {}).get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        age(obj["metadata"].get("creationTimestamp"), at=at),
        *_containers_cells(containers),
    ]


def _serviceaccount_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    return [
        obj["metadata"]["name"],
        len(obj.get("secrets") or []),
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _replicaset_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    return [
        obj["metadata"]["name"],
        spec.get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        age(obj["metadata"].get("creationTimestamp"), at=at),
        *_containers_cells(containers),
        _format_selector(spec.get("selector")),
    ]


def _pvc_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    bound = status.get("phase") == "Bound"
    modes = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}  # fmt: skip
    return [
        obj["metadata"]["name"],
        status.get("phase", "Pending"),
        spec.get("volumeName", "") if bound else "",
        (status.get("capacity") or {}).get("storage", "") if bound else "",
        ",".join(modes.get(m, m) for m in status.get("accessModes") or []) if bound else "",
        spec.get("storageClassName") or "<unset>",
        spec.get("volumeAttributesClassName") or "<unset>",
        age(obj["metadata"].get("creationTimestamp"), at=at),
        spec.get("volumeMode", "Filesystem"),
    ]


def _pdb_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    spec = obj.get("spec", {})
    return [
        obj["metadata"]["name"],
        str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
        str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
        obj.get("status", {}).get("disruptionsAllowed", 0),
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _endpoints_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    shown = [
        f"{address.get('ip')}:{port.get('port')}"
        for subset in obj.get("subsets") or ()
        for port in subset.get("ports") or ()
        for address in subset.get("addresses") or ()
    ]
    text = ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")
    return [
        obj["metadata"]["name"],
        text or "<none>",
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _endpoint_slice_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    ports = ",".join(str(p.get("port")) for p in obj.get("ports") or ()) or "<unset>"
    shown = [a for e in obj.get("endpoints") or () for a in e.get("addresses") or ()]
    text = ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")
    return [
        obj["metadata"]["name"],
        obj.get("addressType", ""),
        ports,
        text or "<unset>",
        age(obj["metadata"].get("creationTimestamp"), at=at),
    ]


def _binding_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    ref = obj.get("roleRef") or {}
    subjects = obj.get("subjects") or []

    def named(kind: str) -> str:
        return ", ".join(
            (f"{s.get('namespace', '')}/{s.get('name')}" if kind == "ServiceAccount" else s["name"])
            for s in subjects
            if s.get("kind") == kind
        )

    return [
        obj["metadata"]["name"],
        f"{ref.get('kind')}/{ref.get('name')}",
        age(obj["metadata"].get("creationTimestamp"), at=at),
        named("User"),
        named("Group"),
        named("ServiceAccount"),
    ]


def _created_at_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp")]


def _default_row(obj: JsonObject, at: dt.datetime) -> list[Any]:
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"), at=at)]


def _wide(name: str, description: str = "") -> Column:
    return Column(name, description, priority=1)


_PRINTERS: dict[tuple[str, str], TablePrinter] = {
    ("", "pods"): TablePrinter(
        (
            _NAME,
            Column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            Column("Status", "The aggregate status of the containers in this pod."),
            Column(
                "Restarts",
                "The number of times the containers in this pod have been restarted and when "
                "the last container in this pod has restarted.",
            ),
            _AGE,
            _wide("IP", "IP address allocated to the pod. Routable at least within the cluster."),
            _wide("Node", "NodeName is a request to schedule this pod onto a specific node."),
            _wide("Nominated Node", "nominatedNodeName is set when this pod preempts other pods."),
            _wide("Readiness Gates", "If specified, all readiness gates will be evaluated."),
        ),
        _pod_row,
    ),
    ("batch", "jobs"): TablePrinter(
        (
            _NAME,
            Column("Status", "Status of the job."),
            Column(
                "Completions",
                "The desired number of successfully finished pods the job should be run with.",
            ),
            Column("Duration", "Time required to complete the job."),
            _AGE,
            _wide("Containers", "Names of each container in the template."),
            _wide("Images", "Images referenced by each container in the template."),
            _wide("Selector", "A label query over pods that should match the pod count."),
        ),
        _job_row,
    ),
    ("", "nodes"): TablePrinter(
        (
            _NAME,
            Column("Status", "The status of the node"),
            Column("Roles", "The roles of the node"),
            _AGE,
            Column("Version", "Kubelet Version reported by the node."),
            _wide("Internal-IP", "List of addresses reachable to the node."),
            _wide("External-IP", "List of addresses reachable to the node."),
            _wide("OS-Image", "OS Image reported by the node from /etc/os-release."),
            _wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r'."),
            _wide("Container-Runtime", "Container runtime version reported by the node."),
        ),
        _node_row,
    ),
    ("", "namespaces"): TablePrinter(
        (_NAME, Column("Status", "The status of the namespace"), _AGE), _namespace_row
    ),
    ("", "events"): TablePrinter(
        (
            Column(
                "Last Seen",
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            Column("Type", "Type of this event (Normal, Warning)."),
            Column("Reason", "This should be a short, machine understandable string."),
            Column("Object", "The object that this event is about."),
            _wide("Subobject", "The subobject (fieldPath) this event is about."),
            _wide("Source", "The component reporting this event."),
            Column("Message", "A human-readable description of the status of this operation."),
            _wide("First Seen", "The time at which the event was first recorded."),
            _wide("Count", "The number of times this event has occurred."),
            _wide("Name", "Name must be unique within a namespace."),
        ),
        _event_row,
    ),
    ("", "configmaps"): TablePrinter(
        (_NAME, Column("Data", "Number of data entries."), _AGE), _configmap_row
    ),
    ("", "secrets"): TablePrinter(
        (
            _NAME,
            Column("Type", "The type of the secret"),
            Column("Data", "Number of data entries."),
            _AGE,
        ),
        _secret_row,
    ),
    ("", "services"): TablePrinter(
        (
            _NAME,
            Column("Type", "The type of the service."),
            Column("Cluster-IP", "The IP address of the service."),
            Column("External-IP", "The external IP address of the service."),
            Column("Port(s)", "The ports exposed by the service."),
            _AGE,
            _wide(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ),
        _service_row,
    ),
    ("", "serviceaccounts"): TablePrinter(
        (_NAME, Column("Secrets", "Secrets is a list of the secrets in the same namespace."), _AGE),
        _serviceaccount_row,
    ),
    ("coordination.k8s.io", "leases"): TablePrinter(
        (_NAME, Column("Holder", "The holder of the lease."), _AGE), _lease_row
    ),
    ("apps", "deployments"): TablePrinter(
        (
            _NAME,
            Column("Ready", "Number of the pod with ready state"),
            Column(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the "
                "desired template spec.",
            ),
            Column("Available", "Total number of available pods targeted by this deployment."),
            _AGE,
            _wide("Containers", "Names of each container in the template."),
            _wide("Images", "Images referenced by each container in the template."),
            _wide("Selector", "Label selector for pods."),
        ),
        _deployment_row,
    ),
    ("apps", "replicasets"): TablePrinter(
        (
            _NAME,
            Column("Desired", "Number of desired pods"),
            Column("Current", "Number of actual replicas"),
            Column("Ready", "Number of ready replicas"),
            _AGE,
            _wide("Containers", "Names of each container in the template."),
            _wide("Images", "Images referenced by each container in the template."),
            _wide("Selector", "Label selector for pods."),
        ),
        _replicaset_row,
    ),
    ("", "persistentvolumeclaims"): TablePrinter(
        (
            _NAME,
            Column("Status", "The phase of the claim."),
            Column("Volume", "The volume bound to the claim."),
            Column("Capacity", "The storage the claim holds."),
            Column("Access Modes", "How the volume may be mounted."),
            Column("StorageClass", "The storage class of the claim."),
            Column("VolumeAttributesClass", "The volume attributes class of the claim."),
            _AGE,
            _wide("VolumeMode", "Filesystem or Block."),
        ),
        _pvc_row,
    ),
    ("", "endpoints"): TablePrinter(
        (_NAME, Column("Endpoints", "Endpoints of the service"), _AGE), _endpoints_row
    ),
    ("discovery.k8s.io", "endpointslices"): TablePrinter(
        (
            _NAME,
            Column("AddressType", "The IP protocol family of the addresses."),
            Column("Ports", "The ports of the endpoints."),
            Column("Endpoints", "The addresses of the endpoints."),
            _AGE,
        ),
        _endpoint_slice_row,
    ),
    ("policy", "poddisruptionbudgets"): TablePrinter(
        (
            _NAME,
            Column("Min Available", "The minimum number of pods that must be available."),
            Column("Max Unavailable", "The maximum number of pods that may be unavailable."),
            Column("Allowed Disruptions", "Calculated number of pods that may be disrupted."),
            _AGE,
        ),
        _pdb_row,
    ),
    **{
        ("rbac.authorization.k8s.io", plural): TablePrinter(
            (
                _NAME,
                Column(
                    "Created At", "When the object was created.", type="string", format="date-time"
                ),
            ),
            _created_at_row,
        )
        for plural in ("clusterroles", "roles")
    },
    **{
        ("rbac.authorization.k8s.io", plural): TablePrinter(
            (
                _NAME,
                Column("Role", "The role this binding grants."),
                _AGE,
                _wide("Users", "Users in the binding."),
                _wide("Groups", "Groups in the binding."),
                _wide("ServiceAccounts", "ServiceAccounts in the binding."),
            ),
            _binding_row,
        )
        for plural in ("clusterrolebindings", "rolebindings")
    },
    ("apps", "statefulsets"): TablePrinter(
        (
            _NAME,
            Column("Ready", "Number of the pod with ready state"),
            _AGE,
            _wide("Containers", "Names of each container in the template."),
            _wide("Images", "Images referenced by each container in the template."),
        ),
        _statefulset_row,
    ),
}
_DEFAULT_PRINTER = TablePrinter((_NAME, _AGE), _default_row)


_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.-]+)==[\"']([^\"']*)[\"']\)\]")


def json_path(obj: Any, path: str) -> Any:
    """The subset of kubectl JSONPath CRD printer columns use: `.a.b`, `[0]`, `[?(@.k=="v")]`."""
    current: list[Any] = [obj]
    for match in _PATH_STEP.finditer(path.strip().lstrip("{").rstrip("}")):
        key, index, filter_key, filter_value = match.groups()
        following: list[Any] = []
        for value in current:
            if key is not None and isinstance(value, dict) and key in value:
                following.append(value[key])
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                following.append(value[int(index)])
            elif filter_key is not None and isinstance(value, list):
                following += [
                    item
                    for item in value
                    if isinstance(item, dict) and str(item.get(filter_key)) == filter_value
                ]
        current = following
    if not current:
        return None
    return current[0] if len(current) == 1 else ",".join(str(v) for v in current)


def _custom_printer(resource: ResourceType) -> TablePrinter:
    columns = [_NAME] + [
        Column(name, description, priority=priority, type=kind)
        for name, kind, _, priority, description in resource.printer_columns
    ]

    def row(obj: JsonObject, at: dt.datetime) -> list[Any]:
        cells: list[Any] = [obj["metadata"]["name"]]
        for _, kind, path, _, _ in resource.printer_columns:
            value = json_path(obj, path)
            if kind == "date" and isinstance(value, str):
                value = age(value, at=at)
            cells.append(value)
        return cells

    # "date" columns are rendered as ages, so they are declared as strings to kubectl.
    return TablePrinter(
        tuple(
            Column(
                c.name,
                c.description,
                c.priority,
                "string" if c.type == "date" else c.type,
                c.format,
            )
            for c in columns
        ),
        row,
    )


def printer_for(resource: ResourceType) -> TablePrinter:
    if resource.printer_columns:
        return _custom_printer(resource)
    return _PRINTERS.get((resource.group, resource.plural), _DEFAULT_PRINTER)


def _row_object(obj: JsonObject, include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def render_table(
    resource: ResourceType,
    objects: Sequence[JsonObject],
    *,
    resource_version: str,
    continue_token: str | None = None,
    remaining: int | None = None,
    include_object: str = "Metadata",
    with_headers: bool = True,
) -> JsonObject:
    """A meta.k8s.io/v1 Table; `with_headers=False` for watch events after the first."""
    printer = printer_for(resource)
    at = now()
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.row(obj, at)}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    if remaining is not None:
        metadata["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in printer.columns] if with_headers else None,
        "rows": rows,
    }
