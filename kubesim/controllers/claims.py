"""PersistentVolumeClaims bound at once to a directory on the host, without PersistentVolumes.

Like a dynamic provisioner with `volumeBindingMode: Immediate` and reclaim policy Delete,
minus the PV objects: a new claim is Bound straight away (spec.volumeName `pvc-<uid>`,
status capacity = its storage request, its access modes, the bind annotations), its data lives
in `<claims root>/<namespace>/<claim>` (the process runtime mounts it, see
`kubesim.kubelet.volumes`), and deleting the claim deletes the directory. Simulated pods
never touch it. Started by `kubesim.cluster`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kubesim.apiserver.store import EventType, StoreEvent
from kubesim.controllers.base import QueueController
from kubesim.objects import JsonObject

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

__all__ = ["ClaimBinder"]

Key = tuple[str, str]


class ClaimBinder(QueueController[Key]):
    name = "persistentvolume-binder"

    def __init__(self, cluster: Cluster, claims_root: Callable[[], Path]) -> None:
        super().__init__()
        self.registry = cluster.registry
        self.store = cluster.store
        self.claims = cluster.types.core("persistentvolumeclaims")
        self.claims_root = claims_root
        self.store.subscribe(self.claims, self._on_claim)

    def _on_claim(self, event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if event.type is EventType.DELETED:
            shutil.rmtree(self.claims_root() / meta["namespace"] / meta["name"], ignore_errors=True)
            return
        if event.obj.get("status", {}).get("phase") != "Bound":
            self.enqueue((meta["namespace"], meta["name"]))

    def reconcile(self, key: Key) -> None:
        claim = self.store.get(self.claims, *key)
        if claim is None or claim.get("status", {}).get("phase") == "Bound":
            return
        spec = claim.get("spec", {})
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        modes = list(spec.get("accessModes") or ["ReadWriteOnce"])

        def bind(new: JsonObject) -> None:
            new.setdefault("spec", {})["volumeName"] = f"pvc-{new['metadata']['uid']}"
            annotations = new["metadata"].setdefault("annotations", {})
            annotations["pv.kubernetes.io/bind-completed"] = "yes"
            annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
            new["status"] = {
                "phase": "Bound",
                "accessModes": modes,
                "capacity": {"storage": storage},
            }

        self.registry.mutate(self.claims, *key, bind)
