"""Server-side defaulting on create, as the real registry strategies and admission apply it.

One function per kind that has defaults, chosen from `DEFAULTERS` by (group, plural). Each
takes a freshly decoded object it may modify in place (the caller owns it). Called by
`kubesim.apiserver.registry` on create, and for Jobs also on update of the pod template.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kubesim.objects import JsonObject

__all__ = ["DEFAULTERS", "apply_defaults", "default_pod_spec"]

_CLUSTER_IPS = itertools.count(1)

# DefaultTolerationSeconds admission adds these to every pod.
_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def _default_container(container: dict[str, Any]) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    latest = ":" not in tag or tag.endswith(":latest")
    container.setdefault(
        "imagePullPolicy", "Always" if latest and "@" not in tag else "IfNotPresent"
    )
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: dict[str, Any], *, default_restart_policy: bool = True) -> None:
    if default_restart_policy:
        spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for container in itertools.chain(
        spec.get("initContainers") or [], spec.get("containers") or []
    ):
        _default_container(container)


def _default_pod(pod: JsonObject) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    tolerations = spec.setdefault("tolerations", [])
    present = {(t.get("key"), t.get("effect")) for t in tolerations}
    for toleration in _DEFAULT_TOLERATIONS:
        if (toleration["key"], toleration["effect"]) not in present:
            tolerations.append(dict(toleration))
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def _qos_class(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    requests = [c.get("resources", {}).get("requests") or {} for c in containers]
    limits = [c.get("resources", {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get("cpu")
        and lim.get("memory")
        and req.get("cpu", lim["cpu"]) == lim["cpu"]
        and req.get("memory", lim["memory"]) == lim["memory"]
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _default_job(job: JsonObject) -> None:
    uid = job["metadata"]["uid"]
    name = job["metadata"]["name"]
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    # With backoffLimitPerIndex the global limit defaults to "unlimited" (max int32).
    spec.setdefault(
        "backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    )
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    labels = template_meta.setdefault("labels", {})
    if not spec.get("manualSelector"):
        controller_labels = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        labels.update(controller_labels)
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    # Job templates must choose OnFailure or Never themselves (validation says "Required").
    default_pod_spec(template.setdefault("spec", {}), default_restart_policy=False)


def _default_namespace(namespace: JsonObject) -> None:
    namespace.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    namespace.setdefault("status", {})["phase"] = "Active"
    labels = namespace["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = namespace["metadata"]["name"]


def _default_service(service: JsonObject) -> None:
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        number = next(_CLUSTER_IPS)
        spec.setdefault("clusterIP", f"10.96.{number // 250 % 250}.{number % 250 + 1}")
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    service.setdefault("status", {}).setdefault("loadBalancer", {})


def _default_secret(secret: JsonObject) -> None:
    secret.setdefault("type", "Opaque")


def _default_replicated(workload: JsonObject) -> None:
    spec = workload.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _default_deployment(deployment: JsonObject) -> None:
    _default_replicated(deployment)
    spec = deployment["spec"]
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxSurge", "25%")
        rolling.setdefault("maxUnavailable", "25%")


def _default_replica_set(replica_set: JsonObject) -> None:
    spec = replica_set.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _default_claim(claim: JsonObject) -> None:
    spec = claim.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    claim.setdefault("status", {}).setdefault("phase", "Pending")


DEFAULTERS: dict[tuple[str, str], Callable[[JsonObject], None]] = {
    ("", "pods"): _default_pod,
    ("batch", "jobs"): _default_job,
    ("", "namespaces"): _default_namespace,
    ("", "services"): _default_service,
    ("", "secrets"): _default_secret,
    ("apps", "deployments"): _default_deployment,
    ("apps", "replicasets"): _default_replica_set,
    ("", "persistentvolumeclaims"): _default_claim,
    ("apps", "statefulsets"): _default_replicated,
}


def apply_defaults(group: str, plural: str, obj: JsonObject) -> None:
    defaulter = DEFAULTERS.get((group, plural))
    if defaulter is not None:
        defaulter(obj)
