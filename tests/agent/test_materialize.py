"""What materialisation creates: the submitted Job, a JobSet's Jobs, or one Indexed Job per
pod set — with identity labels, flavor injection and partial-admission counts — and a JobSet
run end to end on kubesim."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from agent.errors import MaterializeError
from agent.inventory import Labels
from agent.k8s.client import KubeClient, Resource
from agent.materialize import plan_jobs
from api.k8s.jobset import JobSet
from api.quantity import Quantity
from api.v1alpha1.conversions import workload_from_jobset
from api.v1alpha1.messages import DispatchOffer, Hello, WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Admission, PodSetAssignment, Workload
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    eventually,
    flavor,
    job_source,
    offer_for,
    status,
)

FLAVORS = {"default": flavor()}


def admission(*pod_sets: tuple[str, int]) -> Admission:
    return Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(
                name=name,
                flavors={"cpu": "default"},
                resource_usage={"cpu": Quantity.parse(f"{count * 100}m")},
                count=count,
            )
            for name, count in pod_sets
        ],
    )


def jobset_source(name: str = "train") -> dict[str, Any]:
    def rj(rj_name: str, replicas: int, pods: int) -> dict[str, Any]:
        return {
            "name": rj_name,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": pods,
                    "completions": pods,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "command": ["sh", "-c", "echo $JOB_COMPLETION_INDEX"],
                                    "resources": {"requests": {"cpu": "100m"}},
                                }
                            ],
                        }
                    },
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"multiq.dev/queue-name": "lq"},
        },
        "spec": {"replicatedJobs": [rj("leader", 1, 1), rj("workers", 2, 2)]},
    }


def jobset_offer(name: str = "train") -> DispatchOffer:
    source = jobset_source(name)
    workload = workload_from_jobset(JobSet.model_validate(source))
    workload.metadata.uid = f"uid-{name}"
    return DispatchOffer(workload=workload, generation=4, source=source)


def test_a_job_source_keeps_its_name_and_gets_labels_flavor_and_a_clean_metadata() -> None:
    source = job_source("solo", pods=3)
    source["metadata"].update({"uid": "elsewhere", "resourceVersion": "9"})
    source["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "lq"
    source["spec"]["selector"] = {"matchLabels": {"controller-uid": "elsewhere"}}
    source["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    source["spec"]["suspend"] = True
    offer = offer_for(copy.deepcopy(source), generation=2)
    [job] = plan_jobs(offer.workload, 2, source, admission(("main", 3)), FLAVORS)
    meta = job["metadata"]
    assert meta["name"] == "solo" and meta["namespace"] == "team-a"
    assert "uid" not in meta and "resourceVersion" not in meta
    assert meta["labels"]["multiq.dev/dispatch-generation"] == "2"
    assert "kueue.x-k8s.io/queue-name" not in meta["labels"]
    assert "selector" not in job["spec"] and job["spec"]["suspend"] is False
    assert "managedBy" not in job["spec"]
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["multiq.dev/workload-uid"] == "uid-solo"
    assert template["spec"]["nodeSelector"] == {"type": "kubesim"}
    assert template["spec"]["tolerations"] == [{"key": "multiq.dev/test", "operator": "Exists"}]
    assert job["spec"]["parallelism"] == 3


def test_a_partially_admitted_job_runs_with_the_admitted_parallelism() -> None:
    source = job_source("partial", pods=4)
    offer = offer_for(source)
    [job] = plan_jobs(offer.workload, 1, source, admission(("main", 2)), FLAVORS)
    assert job["spec"]["parallelism"] == 2
    assert job["spec"]["completions"] == 2


def test_a_jobset_becomes_one_job_per_replicated_job_replica_with_jobset_labels() -> None:
    offer = jobset_offer()
    jobs = plan_jobs(
        offer.workload, 4, offer.source, admission(("leader", 1), ("workers", 4)), FLAVORS
    )
    assert [j["metadata"]["name"] for j in jobs] == [
        "train-leader-0",
        "train-workers-0",
        "train-workers-1",
    ]
    worker = jobs[2]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "train"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "workers"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["multiq.dev/workload-name"] == offer.workload.metadata.name
    assert worker["spec"]["template"]["spec"]["subdomain"] == "train"
    assert worker["spec"]["completionMode"] == "Indexed"
    assert worker["spec"]["template"]["spec"]["nodeSelector"] == {"type": "kubesim"}


def test_planning_changes_nothing_it_was_given_and_no_two_jobs_share_what_was_made_for_them() -> (
    None
):
    source = jobset_source()
    for rj in source["spec"]["replicatedJobs"]:
        pod_template = rj["template"]["spec"]["template"]
        pod_template["metadata"] = {"labels": {"app": rj["name"]}}
        pod_template["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    workload = workload_from_jobset(JobSet.model_validate(copy.deepcopy(source)))
    workload.metadata.uid = "uid-train"
    offer = DispatchOffer(workload=workload, generation=4, source=source)
    source_before = copy.deepcopy(offer.source)
    workload_before = offer.workload.model_dump()
    jobs = plan_jobs(
        offer.workload, 4, offer.source, admission(("leader", 1), ("workers", 4)), FLAVORS
    )
    direct = plan_jobs(offer.workload, 4, None, admission(("leader", 1), ("workers", 4)), FLAVORS)
    assert offer.source == source_before
    assert offer.workload.model_dump() == workload_before
    templates = [j["spec"]["template"] for j in jobs + direct]
    for path in (("metadata", "labels"), ("spec",)):
        made = [t[path[0]] if len(path) == 1 else t[path[0]][path[1]] for t in templates]
        assert len({id(m) for m in made}) == len(made)
    # One Job's labels are its own: the workers' indexes differ.
    indexes = [
        j["spec"]["template"]["metadata"]["labels"].get("jobset.sigs.k8s.io/job-index")
        for j in jobs
    ]
    assert indexes == ["0", "0", "1"]


def test_a_jobset_cannot_be_partially_admitted() -> None:
    offer = jobset_offer()
    with pytest.raises(MaterializeError, match="all or nothing"):
        plan_jobs(
            offer.workload, 4, offer.source, admission(("leader", 1), ("workers", 2)), FLAVORS
        )


def test_a_workload_without_source_runs_one_indexed_job_per_pod_set() -> None:
    offer = jobset_offer("direct")
    workload: Workload = offer.workload
    jobs = plan_jobs(workload, 1, None, admission(("leader", 1), ("workers", 4)), FLAVORS)
    assert [j["metadata"]["name"] for j in jobs] == [
        f"{workload.metadata.name}-leader",
        f"{workload.metadata.name}-workers",
    ]
    workers = jobs[1]["spec"]
    assert workers["completionMode"] == "Indexed"
    assert workers["completions"] == workers["parallelism"] == 4
    assert workers["template"]["spec"]["nodeSelector"] == {"type": "kubesim"}


def test_an_unknown_source_kind_cannot_be_materialised() -> None:
    source = job_source("odd")
    offer = offer_for(copy.deepcopy(source))
    source["kind"] = "CronJob"
    with pytest.raises(MaterializeError, match="CronJob"):
        plan_jobs(offer.workload, 1, source, admission(("main", 1)), FLAVORS)


async def test_a_jobset_runs_as_its_jobs_and_succeeds_when_all_of_them_complete(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = jobset_offer()
    await hub.offer(offer)
    # The outbox keeps the latest report per workload: a fast JobSet may be reported Running
    # or even Succeeded before Admitted was sent, so any report carrying the admission counts.
    name = offer.workload.metadata.name
    admitted = await hub.wait_for(
        lambda p: (
            isinstance(p, WorkloadStatusReport)
            and p.workload.endswith(name)
            and p.admission is not None
        )
    )
    assert admitted.generation == 4
    done = await hub.wait_for(
        status(WorkloadPhase.SUCCEEDED, offer.workload.metadata.name), within=20
    )
    assert done.pods.succeeded == 5

    async def names() -> list[str]:
        listed = await kube.list(Resource.JOBS, label_selector="multiq.dev/workload-uid=uid-train")
        return sorted(j["metadata"]["name"] for j in listed.items)

    assert await eventually(names) == ["train-leader-0", "train-workers-0", "train-workers-1"]


def test_a_long_workload_name_becomes_a_hashed_label_and_stays_whole_in_an_annotation() -> None:
    source = job_source("x" * 60)
    offer = offer_for(source)
    name = offer.workload.metadata.name
    assert len(name) > 63
    [job] = plan_jobs(offer.workload, 1, source, admission(("main", 1)), FLAVORS)
    label = job["metadata"]["labels"]["multiq.dev/workload-name"]
    assert len(label) <= 63 and label == Labels.value(name) and label != name
    assert job["metadata"]["annotations"]["multiq.dev/workload"] == f"team-a/{name}"


async def test_materialising_into_a_namespace_deleted_since_creates_it_again(
    kube: KubeClient,
) -> None:
    from agent.materialize import Materializer

    materializer = Materializer(kube)
    source = job_source("first")
    offer = offer_for(source)
    [job] = plan_jobs(offer.workload, 1, source, admission(("main", 1)), FLAVORS)
    await materializer.ensure([job])
    await kube.delete(Resource.JOBS, "team-a", "first")
    await kube.delete(Resource.NAMESPACES, None, "team-a")
    await eventually(lambda: _namespace_gone(kube, "team-a"))
    second = job_source("second")
    offer = offer_for(second)
    [job] = plan_jobs(offer.workload, 1, second, admission(("main", 1)), FLAVORS)
    [made] = await materializer.ensure([job])
    assert made["metadata"]["name"] == "second"


async def _namespace_gone(kube: KubeClient, name: str) -> bool:
    from agent.errors import K8sNotFoundError

    try:
        await kube.get(Resource.NAMESPACES, None, name)
    except K8sNotFoundError:
        return True
    return False


class _CountingKube:
    """The real client, counting the namespace lookups that reach the cluster."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.namespace_reads = 0

    async def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        if resource is Resource.NAMESPACES:
            self.namespace_reads += 1
        return await self.kube.get(resource, namespace, name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)


async def test_a_burst_of_admissions_into_a_namespace_not_yet_known_looks_it_up_once(
    kube: KubeClient,
) -> None:
    from agent.materialize import Materializer

    counting = _CountingKube(kube)
    materializer = Materializer(counting)
    jobs = []
    for i in range(20):
        source = job_source(f"burst-{i}")
        [job] = plan_jobs(offer_for(source).workload, 1, source, admission(("main", 1)), FLAVORS)
        jobs.append(job)
    made = await asyncio.gather(*(materializer.ensure([job]) for job in jobs))
    assert counting.namespace_reads == 1
    assert sorted(m["metadata"]["name"] for [m] in made) == sorted(f"burst-{i}" for i in range(20))
