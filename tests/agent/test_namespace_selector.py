"""A ClusterQueue's namespaceSelector (matchLabels and matchExpressions) is matched against
the labels the member cluster's namespaces really carry: the agent mirrors them, so a label
added later counts at once. A real agent on kubesim; the label changed with the real
kubectl."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent.k8s.client import KubeClient, Resource
from agent.snapshots import namespace_labels
from api.k8s.core import LabelSelector
from api.v1alpha1.messages import (
    ConfigSync,
    NamespaceLabels,
    OfferRejected,
    Payload,
    RejectReason,
    WorkloadPhase,
)
from kubesim.testing import RunningSimulator
from tests.agent.conftest import (
    CLUSTER,
    AgentRunner,
    FakeHub,
    cluster_queue,
    eventually,
    flavor,
    job_source,
    local_queue,
    offer_for,
    status,
)


def selecting_config() -> ConfigSync:
    cq = cluster_queue(cpu="4")
    cq.spec.namespace_selector = LabelSelector.model_validate(
        {
            "matchLabels": {"team": "ml"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}],
        }
    )
    return ConfigSync(
        revision=1,
        resource_flavors=[flavor()],
        cluster_queues=[cq],
        local_queues=[local_queue(namespace=ns) for ns in ("team-a", "team-b", "team-c")],
    )


def rejected(name: str) -> Callable[[Payload], bool]:
    return lambda p: isinstance(p, OfferRejected) and p.workload.endswith(name)


async def test_work_is_admitted_only_in_namespaces_the_selector_matches_even_once_relabelled(
    sim: RunningSimulator, kube: KubeClient, agents: AgentRunner, hub: FakeHub
) -> None:
    await kube.create(
        Resource.NAMESPACES, None, {"metadata": {"name": "team-a", "labels": {"team": "ml"}}}
    )
    await kube.create(Resource.NAMESPACES, None, {"metadata": {"name": "team-b"}})
    gold = {"team": "ml", "tier": "gold"}  # (matchExpressions: tier must not exist)
    await kube.create(Resource.NAMESPACES, None, {"metadata": {"name": "team-c", "labels": gold}})
    hub.config = selecting_config()
    agent = await agents.start()

    await hub.offer(offer_for(job_source("selected", namespace="team-a")))
    await hub.offer(offer_for(job_source("outside", namespace="team-b")))
    await hub.offer(offer_for(job_source("gold", namespace="team-c")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "selected"))
    # Waiting here cannot help: the hub is told at once, and may place it on another cluster.
    refused = await hub.wait_for(rejected("outside"))
    assert refused.reason is RejectReason.INADMISSIBLE
    assert refused.message == "namespace team-b is not selected by cluster queue cq"
    await hub.wait_for(rejected("gold"))

    kubeconfig = str(sim.kubeconfigs[CLUSTER])
    labelled = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", kubeconfig, "label", "namespace", "team-b", "team=ml",
    )  # fmt: skip
    assert await labelled.wait() == 0
    await eventually(lambda: agent.inventory.namespace_labels()["team-b"].get("team") == "ml")
    await hub.offer(offer_for(job_source("later", namespace="team-b")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "later"))
    assert not any(rejected("later")(p) for p in hub.payloads)


async def test_the_hubs_tenant_label_counts_and_a_namespace_made_here_carries_it(
    kube: KubeClient, agents: AgentRunner, hub: FakeHub
) -> None:
    # team-b does not exist in the cluster yet; the hub says it is the "ml" team's.
    pushed = selecting_config()
    pushed.namespaces = [NamespaceLabels(name="team-b", labels={"team": "ml"})]
    hub.config = pushed
    await agents.start()

    await hub.offer(offer_for(job_source("tenant-work", namespace="team-b")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "tenant-work"))
    made = await kube.get(Resource.NAMESPACES, None, "team-b")
    assert made["metadata"]["labels"]["team"] == "ml"
    assert made["metadata"]["labels"]["multiq.dev/managed-by"] == "multiq-agent"


def test_the_hubs_labels_go_over_the_clusters_and_name_namespaces_not_made_yet() -> None:
    cluster = {"team-a": {"team": "vision", "env": "prod"}}
    pushed = ConfigSync(
        revision=1,
        namespaces=[
            NamespaceLabels(name="team-a", labels={"team": "ml"}),
            NamespaceLabels(name="team-z", labels={"team": "ml"}),
        ],
    )
    assert namespace_labels(cluster, pushed) == {
        "team-a": {"team": "ml", "env": "prod"},
        "team-z": {"team": "ml"},
    }
    assert cluster == {"team-a": {"team": "vision", "env": "prod"}}  # (not changed)
