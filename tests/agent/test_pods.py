"""Plain Pods and pod groups on a member cluster: planned as gated bare Pods with each pod
set's flavor, ungated together only once every pod of the group exists (all or nothing), and
run end to end on kubesim — Succeeded when every pod succeeded, Failed naming a failed pod,
their pods deleted on a cancel."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import MaterializeError
from agent.inventory import Labels
from agent.k8s.client import KubeClient, Resource
from agent.materialize import Materializer, plan_jobs
from agent.status import observe
from api.k8s.pod import Pod
from api.quantity import Quantity
from api.v1alpha1.conversions import workload_from_pods
from api.v1alpha1.messages import Cancel, DispatchOffer, Hello, WorkloadPhase
from api.v1alpha1.queues import ResourceFlavor
from api.v1alpha1.workload import Admission, PodSetAssignment
from tests.agent.conftest import AgentRunner, FakeHub, eventually, flavor, status

GATE = "kueue.x-k8s.io/admission"


def group_pod(name: str, *, group: str = "ring", total: int = 3, script: str = "true") -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/pod-group-name": group,
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", script],
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
        },
    }


def group_offer(pods: list[dict[str, Any]], *, uid: str = "uid-ring") -> DispatchOffer:
    if len(pods) == 1 and "pod-group-name" not in str(pods[0]["metadata"]["labels"]):
        source: dict[str, Any] = pods[0]
    else:
        source = {"apiVersion": "v1", "kind": "List", "items": pods}
    workload = workload_from_pods([Pod.model_validate(p) for p in pods])
    workload.metadata.uid = uid
    return DispatchOffer(workload=workload, generation=2, source=source)


def admitted(offer: DispatchOffer, flavors: dict[str, str] | None = None) -> Admission:
    return Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(
                name=ps.name,
                flavors={"cpu": (flavors or {}).get(ps.name, "default")},
                resource_usage={"cpu": Quantity.parse(f"{ps.count * 100}m")},
                count=ps.count,
            )
            for ps in offer.workload.spec.pod_sets
        ],
    )


FLAVORS = {"default": flavor(), "big": flavor("big")}


# --- planning --------------------------------------------------------------------------------


def test_a_pod_group_is_planned_as_its_own_pods_gated_and_labelled_without_any_job() -> None:
    offer = group_offer([group_pod(f"ring-{i}") for i in range(3)])
    pods = plan_jobs(offer.workload, 2, offer.source, admitted(offer), FLAVORS, 300, "east")
    assert [(p["kind"], p["metadata"]["name"]) for p in pods] == [
        ("Pod", "ring-0"),
        ("Pod", "ring-1"),
        ("Pod", "ring-2"),
    ]
    for pod in pods:
        meta, spec = pod["metadata"], pod["spec"]
        assert spec["schedulingGates"] == [{"name": GATE}]
        assert meta["labels"][Labels.UID] == "uid-ring"
        assert meta["labels"][Labels.GENERATION] == "2"
        assert "kueue.x-k8s.io/queue-name" not in meta["labels"]
        assert meta["annotations"][Labels.WORKLOAD_ANNOTATION] == "team-a/pod-group-ring"
        assert meta["annotations"][Labels.CLUSTER_ANNOTATION] == "east"
        # A pod's deadline can only be shortened: no fencing deadline on bare pods.
        assert "activeDeadlineSeconds" not in spec


def test_each_pod_of_a_group_gets_the_flavor_of_its_own_pod_set() -> None:
    big = group_pod("ring-leader")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    offer = group_offer([big, group_pod("ring-1"), group_pod("ring-2")])
    leader_set = next(ps.name for ps in offer.workload.spec.pod_sets if ps.count == 1)
    big_flavor = ResourceFlavor.model_validate(
        {"metadata": {"name": "big"}, "spec": {"nodeLabels": {"size": "big"}}}
    )
    pods = plan_jobs(
        offer.workload,
        2,
        offer.source,
        admitted(offer, {leader_set: "big"}),
        {"default": flavor(), "big": big_flavor},
    )
    selectors = {p["metadata"]["name"]: p["spec"].get("nodeSelector") for p in pods}
    assert selectors == {
        "ring-leader": {"size": "big"},
        "ring-1": {"type": "kubesim"},
        "ring-2": {"type": "kubesim"},
    }


def test_a_partially_admitted_pod_group_cannot_be_materialised() -> None:
    offer = group_offer([group_pod(f"ring-{i}") for i in range(3)])
    admission = admitted(offer)
    admission.pod_set_assignments[0].count = 2
    with pytest.raises(MaterializeError, match="all or nothing"):
        plan_jobs(offer.workload, 2, offer.source, admission, FLAVORS)


# --- status ----------------------------------------------------------------------------------


def _seen(name: str, phase: str, reason: str = "") -> dict[str, Any]:
    labels = {Labels.UID: "u", Labels.GENERATION: "1"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": phase, **({"reason": reason} if reason else {})},
    }


def _phase_of(*pods: dict[str, Any]) -> tuple[WorkloadPhase, str]:
    obs = observe(uid="u", generation=1, job_names=["a", "b", "c"], jobs=[], pods=list(pods))
    return obs.phase, obs.message


def test_a_pod_group_succeeds_only_when_every_pod_succeeded() -> None:
    done = [_seen(n, "Succeeded") for n in "abc"]
    assert _phase_of(*done) == (WorkloadPhase.SUCCEEDED, "")
    assert _phase_of(done[0], done[1], _seen("c", "Running"))[0] is WorkloadPhase.RUNNING
    assert _phase_of(*[_seen(n, "Pending") for n in "abc"])[0] is WorkloadPhase.ADMITTED


def test_a_failed_pod_fails_the_group_once_no_pod_of_it_runs_any_more() -> None:
    failed = _seen("b", "Failed", "Error")
    assert _phase_of(_seen("a", "Succeeded"), failed, _seen("c", "Running"))[0] is (
        WorkloadPhase.RUNNING
    )
    assert _phase_of(_seen("a", "Succeeded"), failed, _seen("c", "Succeeded")) == (
        WorkloadPhase.FAILED,
        "pod b: Error",
    )


def test_a_group_whose_pod_was_deleted_before_it_ran_fails_naming_it() -> None:
    phase, message = _phase_of(_seen("a", "Succeeded"), _seen("c", "Succeeded"))
    assert phase is WorkloadPhase.FAILED
    assert message == "pods deleted outside MultiQ before they ran: b"


# --- on kubesim ------------------------------------------------------------------------------


class _RecordingKube:
    """The real client, recording the pod creates and patches in the order they are sent."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.calls: list[tuple[str, str]] = []

    async def create(self, resource: Resource, namespace: str, body: Any) -> Any:
        if resource is Resource.PODS:
            self.calls.append(("create", body["metadata"]["name"]))
        return await self.kube.create(resource, namespace, body)

    async def patch(self, resource: Resource, namespace: str, name: str, body: Any) -> Any:
        self.calls.append(("patch", name))
        return await self.kube.patch(resource, namespace, name, body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)


async def test_no_pod_of_a_group_is_ungated_before_every_pod_of_it_exists(
    kube: KubeClient,
) -> None:
    offer = group_offer([group_pod(f"ring-{i}") for i in range(3)])
    recording = _RecordingKube(kube)
    materializer = Materializer(recording)  # type: ignore[arg-type]
    await materializer.ensure(plan_jobs(offer.workload, 2, offer.source, admitted(offer), FLAVORS))
    creates = [("create", f"ring-{i}") for i in range(3)]
    assert recording.calls == creates + [("patch", f"ring-{i}") for i in range(3)]
    pod = await kube.get(Resource.PODS, "team-a", "ring-0")
    assert not pod["spec"].get("schedulingGates")


async def test_a_group_one_of_whose_pods_cannot_be_made_leaves_the_others_gated(
    kube: KubeClient,
) -> None:
    materializer = Materializer(kube)
    stranger = group_offer([group_pod("ring-2", group="other", total=1)], uid="uid-other")
    await materializer.ensure(
        plan_jobs(stranger.workload, 1, stranger.source, admitted(stranger), FLAVORS)
    )
    offer = group_offer([group_pod(f"ring-{i}") for i in range(3)])
    with pytest.raises(MaterializeError, match="belongs to another workload"):
        await materializer.ensure(
            plan_jobs(offer.workload, 2, offer.source, admitted(offer), FLAVORS)
        )
    for name in ("ring-0", "ring-1"):
        pod = await kube.get(Resource.PODS, "team-a", name)
        assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
        assert (pod.get("status") or {}).get("phase") in (None, "Pending")


async def test_a_pod_group_runs_on_the_cluster_and_succeeds_when_all_its_pods_do(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = group_offer([group_pod(f"ring-{i}", script="echo hi; sleep 0.2") for i in range(3)])
    await hub.offer(offer)
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "pod-group-ring"), within=20)
    assert done.pods.succeeded == 3
    listed = await kube.list(Resource.PODS, label_selector=f"{Labels.UID}=uid-ring")
    assert sorted(p["metadata"]["name"] for p in listed.items) == ["ring-0", "ring-1", "ring-2"]
    jobs = await kube.list(Resource.JOBS, label_selector=f"{Labels.UID}=uid-ring")
    assert not jobs.items


async def test_a_plain_pod_runs_as_itself(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    pod = group_pod("solo", script="echo alone")
    del pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    offer = group_offer([pod], uid="uid-solo")
    await hub.offer(offer)
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, offer.workload.metadata.name))
    assert done.pods.succeeded == 1
    assert (await kube.get(Resource.PODS, "team-a", "solo"))["status"]["phase"] == "Succeeded"


async def test_a_failed_pod_fails_its_group_with_the_pod_named(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    pods = [group_pod("ring-0"), group_pod("ring-1", script="exit 3"), group_pod("ring-2")]
    await hub.offer(group_offer(pods))
    failed = await hub.wait_for(status(WorkloadPhase.FAILED, "pod-group-ring"), within=20)
    finished = next(c for c in failed.conditions if c.type == "Finished")
    assert finished.message.startswith("pod ring-1:")
    assert [e.exit_code for e in failed.exits if e.pod == "ring-1"] == [3]


async def test_a_cancelled_pod_group_loses_its_pods(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = group_offer([group_pod(f"ring-{i}", script="sleep 30") for i in range(3)])
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "pod-group-ring"), within=20)
    await hub.send(Cancel(workload="team-a/pod-group-ring", generation=2, reason="UserDelete"))
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "pod-group-ring"))

    async def left() -> bool:
        listed = await kube.list(Resource.PODS, label_selector=f"{Labels.UID}=uid-ring")
        return not [p for p in listed.items if not p["metadata"].get("deletionTimestamp")]

    await eventually(left)


async def test_a_restarted_agent_adopts_its_running_pod_group_and_reports_its_end(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = group_offer([group_pod(f"ring-{i}", script="sleep 2") for i in range(3)])
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "pod-group-ring"), within=20)
    await agents.stop()
    hub.payloads.clear()
    await agents.start()
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "pod-group-ring"), within=20)
    assert done.pods.succeeded == 3
    listed = await kube.list(Resource.PODS, label_selector=f"{Labels.UID}=uid-ring")
    assert len(listed.items) == 3  # adopted, not made again
