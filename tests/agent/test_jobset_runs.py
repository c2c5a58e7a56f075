"""A JobSet runs on a real kubesim cluster as the JobSet controller would run it, with no
JobSet controller there: InOrder startup creates the workers only once the driver is ready,
successPolicy Any finishes the workload when the driver completes (the workers' Jobs and the
headless Service then go), and a failure policy restarts every Job as its next attempt until
maxRestarts is spent."""

from __future__ import annotations

from typing import Any

from agent.k8s.client import KubeClient, Resource
from api.k8s.jobset import JobSet
from api.v1alpha1.conversions import workload_from_jobset
from api.v1alpha1.messages import DispatchOffer, WorkloadPhase, WorkloadStatusReport
from tests.agent.conftest import AgentRunner, FakeHub, eventually, status


def role(name: str, replicas: int, script: str, ready_after: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", script],
        "resources": {"requests": {"cpu": "100m"}},
    }
    if ready_after is not None:
        # (kubesim passes a grpc probe: the pod is Ready once the initial delay is over)
        container["readinessProbe"] = {
            "grpc": {"port": 1},
            "initialDelaySeconds": ready_after,
            "periodSeconds": 1,
        }
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                    }
                },
            }
        },
    }


def jobset_offer(name: str, roles: list[dict[str, Any]], **spec: Any) -> DispatchOffer:
    source = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"multiq.dev/queue-name": "lq"},
        },
        "spec": {"replicatedJobs": roles, **spec},
    }
    workload = workload_from_jobset(JobSet.model_validate(source))
    workload.metadata.uid = f"uid-{name}"
    return DispatchOffer(workload=workload, generation=1, source=source)


async def job_names(kube: KubeClient) -> set[str]:
    listed = await kube.list(Resource.JOBS, namespace="team-a")
    return {
        j["metadata"]["name"] for j in listed.items if not j["metadata"].get("deletionTimestamp")
    }


async def test_in_order_startup_and_success_policy_any_finish_with_the_driver(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start_with()
    offer = jobset_offer(
        "inorder",
        [role("driver", 1, "sleep 5; echo done", ready_after=2), role("workers", 2, "sleep 60")],
        startupPolicy={"startupPolicyOrder": "InOrder"},
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]},
    )
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "inorder"))
    assert await job_names(kube) == {"inorder-driver-0"}, "workers wait for the driver"
    services = await kube.list(Resource.SERVICES, namespace="team-a")
    assert [s["metadata"]["name"] for s in services.items] == ["inorder"]
    assert services.items[0]["spec"]["clusterIP"] == "None"

    async def workers_started() -> bool:
        return await job_names(kube) == {
            "inorder-driver-0",
            "inorder-workers-0",
            "inorder-workers-1",
        }

    await eventually(workers_started)
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "inorder"), within=30)
    assert isinstance(done, WorkloadStatusReport)

    async def workers_gone() -> bool:
        return await job_names(kube) == {"inorder-driver-0"}

    await eventually(workers_gone)

    async def service_gone() -> bool:
        return not (await kube.list(Resource.SERVICES, namespace="team-a")).items

    await eventually(service_gone)


async def test_a_failure_policy_restarts_every_job_until_max_restarts_then_fails(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start_with()
    offer = jobset_offer(
        "restarts",
        [role("driver", 1, "sleep 30"), role("workers", 1, "sleep 1; exit 3")],
        failurePolicy={"maxRestarts": 1},
        network={"enableDNSHostnames": False},
    )
    await hub.offer(offer)

    async def second_attempt() -> bool:
        listed = await kube.list(Resource.JOBS, namespace="team-a")
        attempts = {
            j["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt")
            for j in listed.items
            if not j["metadata"].get("deletionTimestamp")
        }
        return attempts == {"1"}

    await eventually(second_attempt, within=30)
    failed = await hub.wait_for(status(WorkloadPhase.FAILED, "restarts"), within=30)
    assert isinstance(failed, WorkloadStatusReport)
    assert any("reached the maximum of 1 restarts" in c.message for c in failed.conditions)
    assert not (await kube.list(Resource.SERVICES, namespace="team-a")).items
