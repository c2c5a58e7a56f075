"""waitForPodsReady at the agent: an admitted workload carries a PodsReady condition that
follows its pods, and one whose pods cannot start is evicted with PodsReadyTimeout once the
timeout passes — with the setting the hub sends for the cluster, or the agent's own."""

from __future__ import annotations

from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.federation import WaitForPodsReady
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    config,
    eventually,
    job_source,
    offer_for,
    status,
)


def unschedulable(name: str) -> dict[str, object]:
    source = job_source(name, script="sleep 30")
    spec = source["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"no-such-label": "anywhere"}
    return source


async def test_a_workload_whose_pods_cannot_start_is_evicted_after_the_hubs_timeout(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.config = config().model_copy(
        update={"wait_for_pods_ready": WaitForPodsReady(timeout_seconds=2)}
    )
    await agents.start_with()
    offer = offer_for(unschedulable("stuck"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "stuck"))
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "stuck"), within=15)
    assert isinstance(evicted, WorkloadStatusReport)
    assert evicted.pending_reason == "PodsReadyTimeout"
    assert "pods not ready within the timeout of 2s" in evicted.pending_message

    async def jobs_gone() -> bool:
        return not (await kube.list(Resource.JOBS, namespace="team-a")).items

    await eventually(jobs_gone)


async def test_ready_pods_are_not_evicted_and_the_agents_own_setting_applies(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agents.overrides = {"wait_for_pods_ready": WaitForPodsReady(timeout_seconds=2)}
    agent = await agents.start_with()
    offer = offer_for(job_source("fine", script="sleep 4"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "fine"))

    def pods_ready() -> bool:
        record = agent.admission.held.get(f"team-a/{offer.workload.metadata.name}")
        conditions = record.workload.status.conditions if record and record.workload.status else []
        return any(c.type == "PodsReady" and c.status == "True" for c in conditions)

    await eventually(pods_ready)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "fine"), within=15)
    assert not [p for p in hub.payloads if status(WorkloadPhase.EVICTED, "fine")(p)]

    stuck = offer_for(unschedulable("stuck-too"))
    await hub.offer(stuck)
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "stuck-too"), within=15)
    assert evicted.pending_reason == "PodsReadyTimeout"
