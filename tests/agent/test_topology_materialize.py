"""Materialising a topology assignment: the Jobs' pod templates select the domain every
assigned pod shares — one rack for a pod set that required one, the block when the pods
span racks of one block — on top of the flavor's node labels."""

from __future__ import annotations

from typing import Any

from agent.engine.snapshot import TopologyAssignment as EngineAssignment
from agent.materialize import plan_jobs
from agent.snapshots import api_topology
from api.quantity import Quantity
from api.v1alpha1.workload import Admission, PodSetAssignment
from tests.agent.conftest import flavor, job_source, offer_for

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"


def placed(*domains: tuple[tuple[str, str, str], int]) -> Admission:
    return Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(
                name="main",
                flavors={"cpu": "default"},
                resource_usage={"cpu": Quantity.parse("400m")},
                count=4,
                topology_assignment=api_topology(EngineAssignment((BLOCK, RACK, HOST), domains)),
            )
        ],
    )


def selector_of(admission: Admission) -> dict[str, Any]:
    source = job_source("train", pods=4)
    offer = offer_for(source)
    [job] = plan_jobs(offer.workload, 1, source, admission, {"default": flavor()})
    return dict(job["spec"]["template"]["spec"]["nodeSelector"])


def test_pods_placed_in_one_rack_select_that_rack_and_its_block() -> None:
    selector = selector_of(placed((("b1", "r3", "n24"), 2), (("b1", "r3", "n25"), 2)))
    assert selector == {"type": "kubesim", BLOCK: "b1", RACK: "r3"}


def test_pods_spanning_racks_of_one_block_select_the_block_only() -> None:
    selector = selector_of(placed((("b1", "r3", "n24"), 2), (("b1", "r4", "n32"), 2)))
    assert selector == {"type": "kubesim", BLOCK: "b1"}


def test_pods_on_one_node_select_that_node() -> None:
    selector = selector_of(
        placed(
            (("b0", "r0", "n0"), 4),
        )
    )
    assert selector == {"type": "kubesim", BLOCK: "b0", RACK: "r0", HOST: "n0"}
