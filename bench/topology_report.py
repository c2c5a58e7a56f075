"""How large the topology part of a capacity report is, and what it costs; print JSON.

    .venv/bin/python -m bench.topology_report          # the 1,024-node fabric
    .venv/bin/python -m bench.topology_report quick    # 64 nodes (the smoke test's size)

The cluster is `examples/kubesim/topology-1024.profile` (16 blocks × 8 racks × 8 hosts, 8 GPUs
a host), turned into the engine's nodes by the agent's converter, with one flavor placed by
its Topology (block, rack, host). Three states of its nodes: idle; `scattered` (every node
runs a seeded random 0–8 GPUs of work, 4 CPUs and 32 GiB a GPU: the worst case for grouping
equal nodes); `racks` (whole racks busy, as gangs that require a rack leave a fabric). For
each, the report's bytes as sent (JSON, camelCase, no nulls) with and without its
`topologies`, the agent's CPU milliseconds to build them (agent.topology_summary, after a
first warm-up build), and the hub's to read them (validation plus
hub.placement.topology.topology_views).
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from agent.capacity import capacity_report
from agent.engine.snapshot import FlavorName, Node, ResourceFlavor, ResourceName, Snapshot, Topology
from agent.snapshots import ClusterNodes
from agent.topology_summary import topology_rooms
from api.v1alpha1.messages import CapacityReport, NodeSummary
from hub.placement.topology import level_word, topology_views
from kubesim.profile import build_nodes, load_profile

PROFILE = Path(__file__).resolve().parent.parent / "examples/kubesim/topology-1024.profile"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = ResourceName("nvidia.com/gpu")
SEED = 17
REPEAT = 5


def fabric(nodes: int | None) -> dict[str, Node]:
    profile = load_profile(PROFILE)
    if nodes is not None:
        profile = profile.with_total(nodes)
    objects = {str(n["metadata"]["name"]): n for n in build_nodes(profile)}
    return ClusterNodes().build(objects, {}, lambda namespace, name: False)


def busy(nodes: dict[str, Node], gpus_of: dict[str, int]) -> dict[str, Node]:
    out = {}
    for name, node in nodes.items():
        gpus = gpus_of.get(name, 0)
        usage = {
            GPU: gpus * 1000,
            ResourceName("cpu"): gpus * 4000,
            ResourceName("memory"): gpus * 32 * 2**30 * 1000,
            ResourceName("pods"): gpus * 1000,
        }
        out[name] = dataclasses.replace(node, usage=usage)
    return out


def states(nodes: dict[str, Node]) -> dict[str, dict[str, Node]]:
    rng = random.Random(SEED)
    names = sorted(nodes)
    scattered = {name: rng.randint(0, 8) for name in names}
    racks = sorted({n.labels[RACK] for n in nodes.values()})
    taken = set(rng.sample(racks, len(racks) * 3 // 4))
    whole = {name: 8 for name, n in nodes.items() if n.labels[RACK] in taken}
    return {"idle": nodes, "scattered": busy(nodes, scattered), "racks": busy(nodes, whole)}


def snapshot(nodes: dict[str, Node]) -> Snapshot:
    flavor = ResourceFlavor(FlavorName("gpu-h100"), {"multiq.dev/pool": "gpu"}, topology_name="f")
    return Snapshot(
        cluster_queues={},
        cohorts={},
        local_queues={},
        flavors={flavor.name: flavor},
        workloads={},
        topologies={"f": Topology("f", (BLOCK, RACK, HOST))},
        nodes=nodes,
    )


def measure(nodes: dict[str, Node]) -> dict[str, object]:
    snap = snapshot(nodes)
    at = datetime(2026, 12, 4, tzinfo=UTC)
    report = capacity_report(
        cluster="c", snapshot=snap, nodes=NodeSummary(), observed_at=at, config_revision=1
    )
    wire = report.model_dump_json(by_alias=True, exclude_none=True)
    without = report.model_copy(update={"topologies": None})
    plain = without.model_dump_json(by_alias=True, exclude_none=True)
    topology_rooms(snap)  # warm-up (pydantic builds its validators on first use)
    start = time.process_time()
    for _ in range(REPEAT):
        topology_rooms(snap)
    build = (time.process_time() - start) / REPEAT
    start = time.process_time()
    for _ in range(REPEAT):
        topology_views(CapacityReport.model_validate_json(wire).topologies)
    read = (time.process_time() - start) / REPEAT
    assert report.topologies
    levels = report.topologies[0].levels
    return {
        "bytes": len(wire),
        "bytes_without_topologies": len(plain),
        "domains_sent_in_full": {level_word(lv.level): len(lv.free) for lv in levels},
        "node_groups_sent": sum(len(d.nodes) for lv in levels for d in [*lv.free, *lv.allocatable]),
        "agent_build_cpu_ms": round(build * 1000, 2),
        "hub_read_cpu_ms": round(read * 1000, 2),
    }


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else "full"
    nodes = fabric({"full": None, "quick": 64}[mode])
    out = {
        "mode": mode,
        "nodes": len(nodes),
        "states": {name: measure(state) for name, state in states(nodes).items()},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv)
