"""From the api and the cluster to the engine's topology, and back: Kueue's annotations on a
Job's pod template become the pod set's request, the nodes and pods the agent mirrors become
the engine's nodes (free room, taints, cordons), and an admission's assignment survives the
round trip through the status the agent reports and reads back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.engine.cycle import schedule
from agent.engine.from_api import topology_assignment_from_api, workload_from_api
from agent.engine.snapshot import ResourceName, TopologyAssignment, TopologyMode
from agent.records import Record, on_offer
from agent.snapshots import ClusterNodes, SnapshotCache, api_admission, api_topology
from api.k8s.batch import Job
from api.v1alpha1.conversions import workload_from_job
from api.v1alpha1.messages import ConfigSync
from api.v1alpha1.queues import ClusterQueue, LocalQueue, ResourceFlavor, Topology
from api.v1alpha1.workload import WorkloadStatus
from tests.agent.conftest import job_source, offer_for

RACK = "example.com/topology-rack"
HOST = "kubernetes.io/hostname"


def node(name: str, rack: str, *, cpu: str = "4", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {RACK: rack, HOST: name, "pool": "tas"},
        },
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, on: str, cpu: str, *, owner: str | None = None, phase: str = "Running") -> Any:
    labels = {}
    if owner is not None:
        labels = {"multiq.dev/workload-namespace": "team-a", "multiq.dev/workload-name": owner}
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": name, "labels": labels},
        "spec": {
            "nodeName": on,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }


def tas_config() -> ConfigSync:
    return ConfigSync(
        revision=1,
        resource_flavors=[
            ResourceFlavor.model_validate(
                {
                    "metadata": {"name": "tas"},
                    "spec": {"nodeLabels": {"pool": "tas"}, "topologyName": "fabric"},
                }
            )
        ],
        topologies=[
            Topology.model_validate(
                {
                    "metadata": {"name": "fabric"},
                    "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
                }
            )
        ],
        cluster_queues=[
            ClusterQueue.model_validate(
                {
                    "metadata": {"name": "cq"},
                    "spec": {
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {
                                        "name": "tas",
                                        "resources": [{"name": "cpu", "nominalQuota": 64}],
                                    }
                                ],
                            }
                        ],
                    },
                }
            )
        ],
        local_queues=[
            LocalQueue.model_validate(
                {"metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}
            )
        ],
    )


def rack_job(name: str, pods: int) -> dict[str, Any]:
    source = job_source(name, pods=pods, cpu="1")
    source["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}
    }
    return source


def record(source: dict[str, Any]) -> Record:
    found = on_offer(None, offer_for(source), 0.0).record
    assert found is not None
    return found


def test_kueues_annotation_on_a_jobs_pod_template_becomes_the_pod_sets_request() -> None:
    workload = workload_from_job(Job.model_validate(rack_job("j", 3)))
    [ps] = workload_from_api(workload).pod_sets
    assert ps.topology is not None
    assert (ps.topology.mode, ps.topology.level) == (TopologyMode.REQUIRED, RACK)
    plain = workload_from_job(Job.model_validate(job_source("p")))
    assert workload_from_api(plain).pod_sets[0].topology is None


def test_an_assignment_survives_the_round_trip_through_the_reported_status() -> None:
    ta = TopologyAssignment((RACK, HOST), ((("r0", "n0"), 2), (("r0", "n1"), 1), (("r0", "n2"), 1)))
    api = api_topology(ta)
    assert api.slices[0].values_per_level[0].universal_value == "r0"
    assert api.domains() == [
        ({RACK: "r0", HOST: "n0"}, 2),
        ({RACK: "r0", HOST: "n1"}, 1),
        ({RACK: "r0", HOST: "n2"}, 1),
    ]
    assert topology_assignment_from_api(api) == ta


def test_nodes_count_every_running_pod_but_those_a_topology_assignment_counts() -> None:
    nodes = {
        "n0": node("n0", "r0"),
        "n1": node("n1", "r0", unschedulable=True),
        "n2": node("n2", "r1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
    }
    pods = {
        "daemon": pod("daemon", "n0", "500m"),
        "done": pod("done", "n0", "2", phase="Succeeded"),
        "placed": pod("placed", "n0", "1", owner="gang"),
        "other": pod("other", "n0", "1", owner="not-placed"),
    }
    built = ClusterNodes().build(nodes, pods, lambda ns, name: (ns, name) == ("team-a", "gang"))
    assert built["n0"].usage == {ResourceName("cpu"): 1500, ResourceName("pods"): 2000}
    assert built["n0"].schedulable and not built["n1"].schedulable
    assert [t.key for t in built["n2"].taints] == ["gpu"]


def test_the_agents_snapshot_places_a_rack_job_on_the_nodes_it_mirrors_and_reports_where() -> None:
    cache = SnapshotCache()
    nodes = {f"n{i}": node(f"n{i}", f"r{i // 2}", cpu="2") for i in range(4)}
    pods = {"busy": pod("busy", "n0", "2")}
    held = {"team-a/j": record(rack_job("j", 4))}
    snap = cache.build(tas_config(), held, cluster=(nodes, pods))
    assert set(snap.nodes) == {"n0", "n1", "n2", "n3"}
    result = schedule(snap, 10.0)
    [admit] = result.admitted
    reported = api_admission(admit.admission).pod_set_assignments[0].topology_assignment
    assert reported is not None
    assert reported.domains() == [({RACK: "r1", HOST: "n2"}, 2), ({RACK: "r1", HOST: "n3"}, 2)]

    # Read back from the status, the assignment holds the rack; the job's own pods, once
    # running there, are not counted twice.
    status = WorkloadStatus(admission=api_admission(admit.admission))
    rec = held["team-a/j"]
    held["team-a/j"] = replace(rec, workload=rec.workload.model_copy(update={"status": status}))
    held["team-a/k"] = record(rack_job("k", 1))
    running = {
        **pods,
        **{f"j{i}": pod(f"j{i}", f"n{2 + i // 2}", "1", owner="j") for i in range(4)},
    }
    again = schedule(cache.build(tas_config(), held, cluster=(nodes, running)), 11.0)
    [second] = again.admitted
    where = second.admission.pod_sets[0].topology
    assert where is not None and where.domains == ((("r0", "n1"), 1),)


def test_without_a_flavor_with_a_topology_the_snapshot_reads_no_nodes() -> None:
    cache = SnapshotCache()
    config = tas_config()
    config.resource_flavors[0].spec.topology_name = None
    snap = cache.build(config, {}, cluster=({"n0": node("n0", "r0")}, {}))
    assert snap.nodes == {}


def test_nodes_that_did_not_change_are_the_same_objects_and_an_unchanged_cluster_the_same_map() -> (
    None
):
    converter = ClusterNodes()
    nodes = {"n0": node("n0", "r0"), "n1": node("n1", "r0")}
    first = converter.build(nodes, {}, lambda ns, name: False)
    assert converter.build(nodes, {}, lambda ns, name: False) is first
    busy = converter.build(nodes, {"p": pod("p", "n1", "1")}, lambda ns, name: False)
    assert busy is not first
    assert busy["n0"] is first["n0"] and busy["n1"] is not first["n1"]
    assert busy["n1"].usage[ResourceName("cpu")] == 1000
