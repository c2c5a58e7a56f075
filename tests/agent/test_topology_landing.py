"""Landing pods pod by pod where a topology assignment says: which gated pod goes to which
domain (by rank for Indexed Jobs and JobSets, by room otherwise), the patch that lands it,
which domains lost their node, how materialisation gates the pod templates — and the
lander against a real kubesim, where the landed pods run on the nodes they were given."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.engine.snapshot import TopologyAssignment as EngineAssignment
from agent.k8s.client import KubeClient, Resource
from agent.materialize import plan_jobs
from agent.snapshots import api_topology
from agent.topology_landing import (
    COMPLETION_INDEX,
    POD_SET_LABEL,
    RANK_OFFSET,
    TOPOLOGY_GATE,
    TopologyLander,
    lost_domains,
    plan_landings,
)
from api.k8s.jobset import JobSet
from api.quantity import Quantity
from api.v1alpha1.conversions import workload_from_jobset
from api.v1alpha1.messages import ConfigSync, WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.queues import ResourceFlavor, Topology
from api.v1alpha1.workload import Admission, PodSetAssignment, TopologyAssignment
from kubesim.testing import RunningSimulator
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    cluster_queue,
    eventually,
    flavor,
    job_source,
    local_queue,
    offer_for,
)

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)


def assignment(*domains: tuple[tuple[str, str, str], int]) -> TopologyAssignment:
    return api_topology(EngineAssignment(LEVELS, domains))


def pod(
    name: str,
    *,
    index: int | None = None,
    offset: int | None = None,
    gated: bool = True,
    selector: dict[str, str] | None = None,
    phase: str = "Pending",
    other_gates: tuple[str, ...] = (),
) -> dict[str, Any]:
    annotations = {}
    if index is not None:
        annotations[COMPLETION_INDEX] = str(index)
    if offset is not None:
        annotations[RANK_OFFSET] = str(offset)
    gates = [{"name": g} for g in other_gates] + ([{"name": TOPOLOGY_GATE}] if gated else [])
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "annotations": annotations,
            "creationTimestamp": f"2026-01-01T00:00:{len(name):02d}Z",
        },
        "spec": {"schedulingGates": gates, "nodeSelector": selector or {}},
        "status": {"phase": phase},
    }


def hosts_of(landings: list[Any]) -> dict[str, str]:
    return {landing.name: landing.node_selector[HOST] for landing in landings}


N1 = {BLOCK: "b0", RACK: "r0", HOST: "n1"}
TWO_HOSTS = assignment((("b0", "r0", "n0"), 2), (("b0", "r0", "n1"), 2))


# -- which pod goes where -----------------------------------------------------------------------


def test_indexed_pods_fill_the_domains_in_order_by_their_completion_index() -> None:
    pods = [pod(f"p{i}", index=i) for i in (3, 1, 0, 2)]
    assert hosts_of(plan_landings(TWO_HOSTS, pods)) == {
        "p0": "n0",
        "p1": "n0",
        "p2": "n1",
        "p3": "n1",
    }


def test_a_landing_selects_every_level_of_its_domain_down_to_the_host() -> None:
    [landing] = plan_landings(TWO_HOSTS, [pod("p3", index=3)])
    assert dict(landing.node_selector) == {BLOCK: "b0", RACK: "r0", HOST: "n1"}


def test_a_replaced_pod_goes_to_the_domain_of_the_index_it_replaces() -> None:
    pods = [
        pod("p0", index=0, gated=False, selector={HOST: "n0"}, phase="Running"),
        pod("p1", index=1, gated=False, selector={HOST: "n0"}, phase="Running"),
        pod("p2", index=2, gated=False, selector=N1, phase="Failed"),
        pod("p3", index=3, gated=False, selector={HOST: "n1"}, phase="Running"),
        pod("p2-again", index=2),
    ]
    assert hosts_of(plan_landings(TWO_HOSTS, pods)) == {"p2-again": "n1"}


def test_the_pods_of_a_jobsets_replicas_are_ranked_by_their_jobs_offset() -> None:
    # Replica 1 of two Jobs of 2 pods: its pods are ranks 2 and 3.
    pods = [pod("js-w-1-0", index=0, offset=2), pod("js-w-1-1", index=1, offset=2)]
    assert hosts_of(plan_landings(TWO_HOSTS, pods)) == {"js-w-1-0": "n1", "js-w-1-1": "n1"}


def test_pods_without_an_index_go_where_room_is_left_and_wait_when_there_is_none() -> None:
    uneven = assignment((("b0", "r0", "n0"), 1), (("b0", "r1", "n2"), 2))
    pods = [
        pod("a", gated=False, selector={BLOCK: "b0", RACK: "r0", HOST: "n0"}, phase="Running"),
        pod("b"),
        pod("c"),
        pod("d"),
    ]
    landings = plan_landings(uneven, pods)
    assert Counter(hosts_of(landings).values()) == Counter({"n2": 2})
    assert len(landings) == 2  # the third gated pod waits: every domain has its count


def test_a_pod_whose_landing_was_sent_is_not_planned_again_and_holds_its_place() -> None:
    uneven = assignment((("b0", "r0", "n0"), 1), (("b0", "r1", "n2"), 1))
    pods = [pod("a"), pod("b")]
    sent = {"uid-a": {BLOCK: "b0", RACK: "r0", HOST: "n0"}}
    assert hosts_of(plan_landings(uneven, pods, sent)) == {"b": "n2"}


def test_the_patch_adds_the_domain_to_the_selector_and_keeps_only_the_other_gates() -> None:
    [alone] = plan_landings(TWO_HOSTS, [pod("p0", index=0)])
    assert alone.patch() == {
        "spec": {
            "nodeSelector": {BLOCK: "b0", RACK: "r0", HOST: "n0"},
            "schedulingGates": None,
        }
    }
    [shared] = plan_landings(TWO_HOSTS, [pod("p0", index=0, other_gates=("example.com/x",))])
    assert shared.patch()["spec"]["schedulingGates"] == [{"name": "example.com/x"}]


# -- lost domains -------------------------------------------------------------------------------


def node(name: str, *, ready: bool = True, rack: str = "r0") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {HOST: name, BLOCK: "b0", RACK: rack}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


N0 = {BLOCK: "b0", RACK: "r0", HOST: "n0"}


def on(host: dict[str, str], phase: str, *names: str) -> list[dict[str, Any]]:
    pods = [pod(n, gated=False, selector=host, phase=phase) for n in names]
    for p in pods:
        p["spec"]["nodeName"] = host[HOST]
    return pods


def test_a_host_that_is_gone_is_a_lost_domain() -> None:
    assert lost_domains(TWO_HOSTS, {"n0": node("n0"), "n1": node("n1")}, []) == []
    assert lost_domains(TWO_HOSTS, {"n0": node("n0")}, []) == ["node n1 is gone"]


def test_a_not_ready_host_is_lost_once_its_pods_cannot_run_there() -> None:
    nodes = {"n0": node("n0", ready=False), "n1": node("n1")}
    # Its pods still wait to land (or to be scheduled) there: they never will.
    assert lost_domains(TWO_HOSTS, nodes, []) == ["node n0 is NotReady"]
    # One of its pods failed with it.
    failed = on(N0, "Running", "a") + on(N0, "Failed", "b")
    assert lost_domains(TWO_HOSTS, nodes, failed) == ["node n0 is NotReady"]


def test_pods_still_running_on_a_not_ready_host_are_given_the_benefit_of_the_doubt() -> None:
    nodes = {"n0": node("n0", ready=False), "n1": node("n1")}
    running = on(N0, "Running", "a", "b") + on(N1, "Running", "c", "d")
    assert lost_domains(TWO_HOSTS, nodes, running) == []


def test_a_domain_whose_pods_all_succeeded_is_not_lost_with_its_node() -> None:
    done = [pod(f"p{i}", gated=False, selector=N1, phase="Succeeded") for i in range(2)]
    assert lost_domains(TWO_HOSTS, {"n0": node("n0")}, done) == []


def test_a_rack_level_domain_is_lost_only_when_no_ready_node_is_left_in_it() -> None:
    racks = api_topology(EngineAssignment((BLOCK, RACK), ((("b0", "r0"), 2), (("b0", "r1"), 2))))
    nodes = {
        "n0": node("n0", ready=False),
        "n1": node("n1"),
        "n2": node("n2", rack="r1", ready=False),
    }
    assert lost_domains(racks, nodes, []) == [f"no Ready node in {RACK}=r1"]


# -- materialisation gates the templates --------------------------------------------------------


def admitted(ta: TopologyAssignment, name: str = "main", count: int = 4) -> Admission:
    return Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(
                name=name,
                flavors={"cpu": "default"},
                resource_usage={"cpu": Quantity.parse("2")},
                count=count,
                topology_assignment=ta,
            )
        ],
    )


def test_a_pod_set_over_several_domains_is_gated_and_labelled_with_its_pod_set() -> None:
    source = job_source("train", pods=4)
    source["spec"]["completionMode"] = "Indexed"
    [job] = plan_jobs(
        offer_for(source).workload, 1, source, admitted(TWO_HOSTS), {"default": flavor()}
    )
    template = job["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": TOPOLOGY_GATE}]
    assert template["metadata"]["labels"][POD_SET_LABEL] == "main"
    assert template["metadata"]["annotations"][RANK_OFFSET] == "0"
    # The level values every domain shares are on the template already.
    assert template["spec"]["nodeSelector"] == {"type": "kubesim", BLOCK: "b0", RACK: "r0"}


def test_a_pod_set_in_one_domain_is_not_gated() -> None:
    source = job_source("small", pods=2)
    one = assignment((("b0", "r0", "n0"), 2))
    [job] = plan_jobs(
        offer_for(source).workload, 1, source, admitted(one, count=2), {"default": flavor()}
    )
    assert "schedulingGates" not in job["spec"]["template"]["spec"]


def test_each_jobset_replica_starts_at_its_first_rank() -> None:
    source = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "team-a",
            "labels": {"multiq.dev/queue-name": "lq"},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": job_source("x")["spec"]["template"],
                        }
                    },
                }
            ]
        },
    }
    workload = workload_from_jobset(JobSet.model_validate(source))
    jobs = plan_jobs(workload, 1, source, admitted(TWO_HOSTS, name="w"), {"default": flavor()})
    offsets = [j["spec"]["template"]["metadata"]["annotations"][RANK_OFFSET] for j in jobs]
    assert offsets == ["0", "2"]


# -- the lander on a real cluster ---------------------------------------------------------------


async def test_gated_pods_of_an_indexed_job_run_on_the_nodes_the_lander_gives_them(
    kube: KubeClient,
) -> None:
    nodes = sorted(n["metadata"]["name"] for n in (await kube.list(Resource.NODES)).items)
    two = api_topology(EngineAssignment((HOST,), (((nodes[1],), 1), ((nodes[0],), 2))))
    source = job_source("landing", pods=3, script="sleep 30", cpu="100m")
    source["spec"]["completionMode"] = "Indexed"
    offer = offer_for(source)
    [job] = plan_jobs(offer.workload, 1, source, admitted(two, count=3), {"default": flavor()})
    await kube.create(Resource.NAMESPACES, None, {"metadata": {"name": "team-a"}})
    await kube.create(Resource.JOBS, "team-a", job)

    async def pods() -> list[dict[str, Any]]:
        listed = await kube.list(Resource.PODS, namespace="team-a")
        return [p for p in listed.items if p["metadata"]["labels"].get(POD_SET_LABEL) == "main"]

    async def all_three() -> list[dict[str, Any]] | None:
        listed = await pods()
        return listed if len(listed) == 3 else None

    gated = await eventually(all_three)
    assert all(p["spec"].get("schedulingGates") for p in gated)
    assert not any(p["spec"].get("nodeName") for p in gated)
    lander = TopologyLander(kube)
    assert lander.land(two, await pods()) == 3

    async def placed() -> dict[str, str] | None:
        now = await pods()
        bound = {
            p["metadata"]["annotations"][COMPLETION_INDEX]: p["spec"].get("nodeName") for p in now
        }
        return bound if all(bound.values()) else None

    assert await eventually(placed) == {"0": nodes[1], "1": nodes[0], "2": nodes[0]}
    await lander.close()


# -- the agent end to end: landing and losing a node --------------------------------------------


def hosts_config() -> ConfigSync:
    """One flavor over every kubesim node, with a topology of hosts."""
    hosts = Topology.model_validate(
        {"metadata": {"name": "hosts"}, "spec": {"levels": [{"nodeLabel": HOST}]}}
    )
    by_host = ResourceFlavor.model_validate(
        {
            "metadata": {"name": "default"},
            "spec": {"nodeLabels": {"type": "kubesim"}, "topologyName": "hosts"},
        }
    )
    return ConfigSync(
        revision=1,
        resource_flavors=[by_host],
        cluster_queues=[cluster_queue(cpu="16")],
        local_queues=[local_queue()],
        topologies=[hosts],
    )


@pytest.fixture
async def hub() -> AsyncIterator[FakeHub]:
    fake = FakeHub(hosts_config())
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_an_agent_lands_a_gang_over_two_hosts_and_evicts_it_when_one_host_fails(
    sim: RunningSimulator, kube: KubeClient, hub: FakeHub, agents: AgentRunner
) -> None:
    await agents.start_with()
    # Two 5-CPU pods on 8-CPU hosts: one a host, so the assignment has two domains.
    source = job_source("pair", pods=2, cpu="5", script="sleep 60")
    source["spec"]["completionMode"] = "Indexed"
    source["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    }
    await hub.offer(offer_for(source))

    async def bound() -> dict[str, str] | None:
        listed = await kube.list(Resource.PODS, namespace="team-a")
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in listed.items}
        return nodes if len(nodes) == 2 and all(nodes.values()) else None

    nodes = await eventually(bound, within=20)
    assert len(set(nodes.values())) == 2
    # (Its pods may be placed before the admission's report reaches the hub.)
    report = await hub.wait_for(
        lambda p: isinstance(p, WorkloadStatusReport) and p.admission is not None
    )
    assert isinstance(report, WorkloadStatusReport) and report.admission is not None
    ta = report.admission.pod_set_assignments[0].topology_assignment
    assert ta is not None and {sel[HOST] for sel, _ in ta.domains()} == set(nodes.values())

    sim.clusters[0].fail_node(sorted(nodes.values())[0])
    evicted = await hub.wait_for(
        lambda p: isinstance(p, WorkloadStatusReport) and p.phase is WorkloadPhase.EVICTED
    )
    assert evicted.pending_reason == "NodeFailures"
    assert f"node {sorted(nodes.values())[0]} is NotReady" in evicted.pending_message
