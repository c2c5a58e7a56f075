"""The topology part of a capacity report: per flavor with a topology, the room of its
domains, level by level, compact enough to send on every report and exact enough for the hub
to decide whether a pod set that requires one domain of a level fits in this cluster now.

Why this form. Whether N pods of a shape fit in one domain is a sum over the domain's nodes
of how many pods fit each node (per node: the least, over resources, of free ÷ request);
a domain's total free room cannot say it, since a rack's free CPU may be split over hosts
too small for one pod. So a domain is sent as its nodes' room, nodes with equal room grouped
(`NodeGroupRoom`): for any shape the hub then counts the pods that fit exactly, as the
engine does. Sending every domain would make a report grow with the cluster, so each level
carries only the domains with the most of each resource but `pods` (`top` each, in full), and
for all the others a bound: per resource the most any of them has in total. A shape that
does not fit that bound fits none of them; one that does is taken as possibly fitting (the
hub may offer it; the agent's engine decides exactly). Answering per shape the hub asks
about would be exact with no bound, but needs the hub to send its waiting shapes to every
agent (a new message, and a report per change of the queue); the waiting shapes of a hub
change far more often than a cluster's racks.

The same is sent for the room when empty (`allocatable`, every node that carries the
flavor's labels and the levels' labels, cordoned or not ready included: they may come
back), so the hub tells "not now" from "never here".

Free room is the engine's: allocatable minus what bound pods request (`Node.usage`) minus
what admitted workloads' topology assignments hold (`Placer`, so assumed admissions count
before their pods run). Taints and node selectors are per pod set and not reflected: the
summary may say a domain fits a pod set its tolerations keep out (the engine then decides).

Pure (no I/O, no clock). Called by: agent.capacity.capacity_report.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from agent.engine.snapshot import Node, ResourceFlavor, Snapshot
from agent.engine.topology import Placer
from api.quantity import Quantity
from api.v1alpha1.messages import DomainRoom, LevelRoom, NodeGroupRoom, TopologyRoom

__all__ = ["TOP_DOMAINS", "topology_rooms"]

TOP_DOMAINS = 4
"""Domains sent in full per level and resource (the others only as a bound)."""

Room = dict[str, int]
Path = tuple[str, ...]


def topology_rooms(snapshot: Snapshot, *, top: int = TOP_DOMAINS) -> list[TopologyRoom]:
    """The room of every flavor with a topology known to the snapshot, by flavor name."""
    flavors = [
        f
        for _, f in sorted(snapshot.flavors.items())
        if f.topology_name is not None and f.topology_name in snapshot.topologies
    ]
    if not flavors:
        return []
    placer = Placer()
    placer.begin(snapshot, [wl for wl in snapshot.workloads.values() if wl.admission is not None])
    held: dict[str, Room] = {}
    for pods_on_nodes in placer.held.values():
        for name, per_pod, pods in pods_on_nodes:
            room = held.setdefault(name, {})
            for res, amount in per_pod.items():
                room[res] = room.get(res, 0) + amount * pods
    out = []
    for flavor in flavors:
        assert flavor.topology_name is not None
        levels = snapshot.topologies[flavor.topology_name].levels
        nodes = [n for n in snapshot.nodes.values() if _carries(n, flavor, levels)]
        allocatable = {n.name: {str(r): v for r, v in n.allocatable.items()} for n in nodes}
        free = {n.name: _free(n, held.get(n.name, {})) for n in nodes if n.schedulable}
        paths = {n.name: tuple(n.labels[label] for label in levels) for n in nodes}
        out.append(
            TopologyRoom(
                flavor=flavor.name,
                topology=flavor.topology_name,
                levels=[
                    _level(label, depth, paths, free, allocatable, top)
                    for depth, label in enumerate(levels, start=1)
                ],
            )
        )
    return out


def _carries(node: Node, flavor: ResourceFlavor, levels: Sequence[str]) -> bool:
    labels = node.labels
    return all(labels.get(k) == v for k, v in flavor.node_labels.items()) and all(
        label in labels for label in levels
    )


def _free(node: Node, held: Mapping[str, int]) -> Room:
    room = {}
    for res, amount in node.allocatable.items():
        room[str(res)] = max(0, amount - node.usage.get(res, 0) - held.get(res, 0))
    return room


def _level(
    label: str,
    depth: int,
    paths: Mapping[str, Path],
    free: Mapping[str, Room],
    allocatable: Mapping[str, Room],
    top: int,
) -> LevelRoom:
    by_domain: dict[Path, list[str]] = {}
    for name in sorted(paths):
        by_domain.setdefault(paths[name][:depth], []).append(name)
    free_domains, free_rest = _domains(by_domain, free, top)
    alloc_domains, alloc_rest = _domains(by_domain, allocatable, top)
    return LevelRoom(
        level=label,
        domains=len(by_domain),
        free=free_domains,
        free_elsewhere=free_rest,
        allocatable=alloc_domains,
        allocatable_elsewhere=alloc_rest,
    )


def _domains(
    by_domain: Mapping[Path, list[str]], rooms: Mapping[str, Room], top: int
) -> tuple[list[DomainRoom], dict[str, Quantity]]:
    """The domains with the most of each resource, in full, and the bound on the others."""
    totals: dict[Path, Room] = {}
    for path, names in by_domain.items():
        total: Room = {}
        for name in names:
            for res, amount in rooms.get(name, {}).items():
                total[res] = total.get(res, 0) + amount
        totals[path] = total
    # `pods` ranks nothing: every node has room for many, and the slots are few.
    resources = sorted({res for total in totals.values() for res in total} - {"pods"})
    chosen: set[Path] = set()
    for res in resources:
        ranked = heapq.nsmallest(top, totals, key=lambda p: (-totals[p].get(res, 0), p))
        chosen.update(p for p in ranked if totals[p].get(res, 0) > 0)
    rest: Room = {}
    for path, total in totals.items():
        if path in chosen:
            continue
        for res, amount in total.items():
            rest[res] = max(rest.get(res, 0), amount)
    domains = [
        DomainRoom(name=path[-1], nodes=_groups(rooms.get(n) for n in by_domain[path]))
        for path in sorted(chosen)
    ]
    return domains, {res: Quantity.from_milli(v) for res, v in sorted(rest.items())}


def _groups(rooms: Iterable[Room | None]) -> list[NodeGroupRoom]:
    counted: dict[tuple[tuple[str, int], ...], int] = {}
    for room in rooms:
        if room is None or not any(room.values()):
            continue  # a node with no room (or not schedulable) holds no pod
        key = tuple(sorted(room.items()))
        counted[key] = counted.get(key, 0) + 1
    return [
        NodeGroupRoom(nodes=n, room={res: Quantity.from_milli(v) for res, v in key})
        for key, n in sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    ]
