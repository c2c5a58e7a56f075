"""Mutating admission plugins kube-apiserver runs on pod creation, as kubesim needs them.

`ServiceAccountAdmission` is the ServiceAccount plugin: unless the pod or its service account
sets `automountServiceAccountToken: false`, it adds the projected volume
`kube-api-access-<5 chars>` (a service-account token of 3607 s, `ca.crt` from the
`kube-root-ca.crt` ConfigMap, the namespace from the downward API; defaultMode 0644) and mounts
it read-only at `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init
container that does not mount that path already. The process runtime
(`kubesim.kubelet.volumes`) then shows containers the files. Registered on the object
registry by `kubesim.cluster`.
"""

from __future__ import annotations

from kubesim.apiserver.store import Store
from kubesim.objects import JsonObject, random_suffix
from kubesim.resources import ResourceType

__all__ = ["SERVICE_ACCOUNT_MOUNT", "ServiceAccountAdmission"]

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
PROJECTED_TOKEN_SECONDS = 3607


def _api_access_projection() -> JsonObject:
    return {
        "defaultMode": 420,
        "sources": [
            {
                "serviceAccountToken": {
                    "expirationSeconds": PROJECTED_TOKEN_SECONDS,
                    "path": "token",
                }
            },
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {
                                "apiVersion": "v1",
                                "fieldPath": "metadata.namespace",
                            },
                        }
                    ]
                }
            },
        ],
    }


# One projection shared by every pod: stored objects are immutable (`kubesim.objects`), and
# building it per pod was a tenth of a simulated pod's creation.
_API_ACCESS_PROJECTION = _api_access_projection()


class ServiceAccountAdmission:
    """Adds the service-account token volume and its mounts to a pod being created."""

    def __init__(self, store: Store, service_accounts: ResourceType) -> None:
        self.store = store
        self.service_accounts = service_accounts

    def __call__(self, pod: JsonObject) -> None:
        spec = pod.setdefault("spec", {})
        if spec.get("automountServiceAccountToken") is False:
            return
        if spec.get("automountServiceAccountToken") is None:
            account = self.store.get(
                self.service_accounts,
                pod["metadata"].get("namespace", ""),
                spec.get("serviceAccountName", "default"),
            )
            if account is not None and account.get("automountServiceAccountToken") is False:
                return
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        needing = [
            c
            for c in containers
            if not any(
                m.get("mountPath") == SERVICE_ACCOUNT_MOUNT for m in c.get("volumeMounts") or ()
            )
        ]
        if not needing:
            return
        name = f"kube-api-access-{random_suffix()}"
        spec.setdefault("volumes", []).append({"name": name, "projected": _API_ACCESS_PROJECTION})
        for container in needing:
            container.setdefault("volumeMounts", []).append(
                {"name": name, "readOnly": True, "mountPath": SERVICE_ACCOUNT_MOUNT}
            )
