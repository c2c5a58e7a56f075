"""The labels and annotations MultiQ puts on every object it creates for a workload: how the
agent finds a workload's Jobs and pods again (the inventory's index), tells its generations
apart, and names the workload a Job runs. Pure.

Called by: agent.materialize (puts them on), agent.inventory and agent.status (read them),
agent.admission (orphans, generations).
"""

from __future__ import annotations

import hashlib

__all__ = ["Labels"]


class Labels:
    """The labels MultiQ puts on every object it creates for a workload."""

    NAMESPACE = "multiq.dev/workload-namespace"
    NAME = "multiq.dev/workload-name"
    UID = "multiq.dev/workload-uid"
    GENERATION = "multiq.dev/dispatch-generation"
    MANAGED = "multiq.dev/managed-by"
    MANAGED_VALUE = "multiq-agent"
    CLUSTER_ANNOTATION = "multiq.dev/cluster"
    """Annotation on every pod template with the member cluster's name (jobs read it through
    the downward API: Slurm mode's SLURM_CLUSTER_NAME)."""
    WORKLOAD_ANNOTATION = "multiq.dev/workload"
    """Annotation with the full `namespace/name` (a label value holds at most 63 chars)."""
    ADMISSION_GATE = "kueue.x-k8s.io/admission"
    """Scheduling gate on a plain Pod or a pod group's pods, as Kueue puts it: they are created
    gated and ungated together once every pod of the group exists (agent.materialize)."""

    @staticmethod
    def value(text: str) -> str:
        """`text` as a label value: itself when short enough, else shortened with a hash."""
        if len(text) <= 63:
            return text
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        return f"{text[:52].rstrip('-._')}-{digest}"
