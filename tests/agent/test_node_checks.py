"""Which running workloads a node failure evicts (agent.node_checks): those with a topology
domain that lost its node, evicted NodeFailures with the lost domains as the message; not
those whose nodes are fine, nor those not running here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.engine.snapshot import TopologyAssignment as EngineAssignment
from agent.node_checks import lost_node_evictions
from agent.records import Record, Report, on_engine_admit, on_offer
from agent.snapshots import api_topology
from api.quantity import Quantity
from api.v1alpha1.messages import WorkloadPhase, WorkloadStatusReport
from api.v1alpha1.workload import Admission, PodSetAssignment
from tests.agent.conftest import job_source, offer_for

NOW = 1000.0
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
TWO_HOSTS = api_topology(EngineAssignment((RACK, HOST), ((("r0", "n0"), 2), (("r0", "n1"), 2))))


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {HOST: name, RACK: "r0"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def running(name: str, phase: WorkloadPhase = WorkloadPhase.RUNNING) -> Record:
    offered = on_offer(None, offer_for(job_source(name, pods=4)), NOW - 100).record
    assert offered is not None
    admission = Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(
                name="main",
                flavors={"cpu": "default"},
                resource_usage={"cpu": Quantity.parse("2")},
                count=4,
                topology_assignment=TWO_HOSTS,
            )
        ],
    )
    admitted = on_engine_admit(offered, admission, NOW - 90).record
    assert admitted is not None
    return replace(admitted, phase=phase, job_names=(name,), jobs_seen=True)


def no_pods(namespace: str, name: str) -> list[dict[str, Any]]:
    return []


def test_a_running_workload_whose_node_is_gone_is_evicted_for_node_failures() -> None:
    held = {"team-a/job-w": running("w")}
    [eviction] = lost_node_evictions(held, {"n0": node("n0")}, no_pods, NOW)
    assert eviction.key == "team-a/job-w"
    assert eviction.message == "node n1 is gone: its pods there cannot run; placed again"
    assert eviction.step.record is not None
    assert eviction.step.record.phase is WorkloadPhase.EVICTED
    [report] = [e.payload for e in eviction.step.effects if isinstance(e, Report)]
    assert isinstance(report, WorkloadStatusReport)
    assert report.phase is WorkloadPhase.EVICTED
    assert report.pending_reason == "NodeFailures"


def test_a_workload_whose_nodes_are_all_there_stays() -> None:
    held = {"team-a/job-w": running("w")}
    assert lost_node_evictions(held, {"n0": node("n0"), "n1": node("n1")}, no_pods, NOW) == []


def test_a_workload_not_running_here_is_not_evicted_for_a_lost_node() -> None:
    held = {
        "team-a/job-done": running("done", WorkloadPhase.SUCCEEDED),
        "team-a/job-back": running("back", WorkloadPhase.EVICTED),
    }
    assert lost_node_evictions(held, {"n0": node("n0")}, no_pods, NOW) == []
