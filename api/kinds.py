"""The one table of every kind MultiQ accepts, ours and upstream ones.

Add a kind here and it is decoded by api.codec, validated by `qctl validate`, exported as a
JSON Schema and served by the hub. Called by: qctl, hub, tests.
"""

from __future__ import annotations

from api.codec import KindRegistry
from api.k8s import batch, jobset, pod
from api.meta import Object
from api.v1alpha1 import federation, queues, templates, workload
from api.v1alpha1 import jobset as multiq_jobset

__all__ = ["ALL_KINDS", "REGISTRY"]

ALL_KINDS: tuple[type[Object], ...] = (
    queues.ResourceFlavor,
    queues.ClusterQueue,
    queues.LocalQueue,
    queues.Cohort,
    queues.WorkloadPriorityClass,
    queues.Topology,
    federation.MemberCluster,
    federation.ClusterSet,
    federation.GlobalQueue,
    federation.Tenant,
    templates.ApplicationProfile,
    templates.JobTemplate,
    templates.VolumeBundle,
    workload.Workload,
    pod.Pod,
    batch.Job,
    jobset.JobSet,
    multiq_jobset.JobSet,
)

REGISTRY = KindRegistry(ALL_KINDS)
