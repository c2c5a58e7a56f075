"""Topology-aware scheduling in the engine: where a pod set's pods go, and why it waits.

A small fabric of 2 blocks × 2 racks × 4 hosts (one CPU per host unless a test says
otherwise) and a flavor `tas` placed by it; workloads ask with Kueue's request kinds
(required, preferred, unconstrained, slices, groups). The assertions read the admission's
topology assignment (pods per host) and the pending reasons, as the agent would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from agent.engine.apply import apply_result
from agent.engine.result import CycleResult, PendingCode
from agent.engine.snapshot import (
    FlavorName,
    Node,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceName,
    Snapshot,
    Taint,
    Topology,
    TopologyMode,
    TopologyRequest,
    Workload,
    WorkloadId,
)
from tests.builders import (
    WorkloadBuilder,
    admitted_ids,
    cq,
    ids,
    preempted_ids,
    reason_of,
    run,
    snapshot,
    wl,
)

BLOCK = "example.com/topology-block"
RACK = "example.com/topology-rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)
TAS = ResourceFlavor(FlavorName("tas"), {"pool": "tas"}, topology_name="fabric")
PLAIN = ResourceFlavor(FlavorName("plain"))


def fabric(
    blocks: int = 2,
    racks: int = 2,
    hosts: int = 4,
    cpu: int = 1,
    *,
    used: Mapping[str, int] | None = None,
    cordoned: Iterable[str] = (),
    tainted: Iterable[str] = (),
) -> dict[str, Node]:
    """Nodes b{block}r{rack}h{host}, in racks b{block}r{rack} of blocks b{block}."""
    out = {}
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                name = f"b{b}r{r}h{h}"
                out[name] = Node(
                    name,
                    {BLOCK: f"b{b}", RACK: f"b{b}r{r}", HOST: name, "pool": "tas"},
                    {ResourceName("cpu"): cpu * 1000, ResourceName("pods"): 110_000},
                    {ResourceName("cpu"): (used or {}).get(name, 0) * 1000},
                    (Taint("dedicated", "x"),) if name in set(tainted) else (),
                    schedulable=name not in set(cordoned),
                )
    return out


def asking(builder: WorkloadBuilder | Workload, *requests: TopologyRequest | None) -> Workload:
    """The workload with its pod sets' topology requests set, in pod-set order."""
    built = builder.build() if isinstance(builder, WorkloadBuilder) else builder
    pod_sets = tuple(
        dataclasses.replace(ps, topology=req)
        for ps, req in zip(built.pod_sets, requests, strict=True)
    )
    return dataclasses.replace(built, pod_sets=pod_sets)


def required(level: str, **kw: object) -> TopologyRequest:
    return TopologyRequest(TopologyMode.REQUIRED, level, **kw)  # type: ignore[arg-type]


def preferred(level: str) -> TopologyRequest:
    return TopologyRequest(TopologyMode.PREFERRED, level)


def gang(name: str, pods: int, *, cpu: int = 1, priority: int = 0) -> WorkloadBuilder:
    return wl(name).queue("q").count(pods).request("cpu", cpu).priority(priority)


def tas_snapshot(
    *workloads: Workload | WorkloadBuilder,
    nodes: Mapping[str, Node] | None = None,
    quota: int = 1000,
    flavors: tuple[ResourceFlavor, ...] = (TAS,),
    preemption: PreemptionPolicy | None = None,
) -> Snapshot:
    queue = cq("q")
    for f in flavors:
        queue = queue.quota("cpu", f.name, nominal=quota)
    if preemption is not None:
        queue = queue.preemption(within=preemption.value)
    snap = snapshot(cqs=[queue], flavors=list(flavors), workloads=list(workloads))
    return dataclasses.replace(
        snap,
        topologies={"fabric": Topology("fabric", LEVELS)},
        nodes=fabric() if nodes is None else nodes,
    )


def placement(result: CycleResult, name: str, pod_set: int = 0) -> dict[str, int]:
    """Pods per host of an admitted workload's pod set."""
    for adm in result.admitted:
        if adm.workload == ids(name)[0]:
            ta = adm.admission.pod_sets[pod_set].topology
            assert ta is not None and ta.levels == LEVELS
            return {values[-1]: pods for values, pods in ta.domains}
    raise AssertionError(f"{name} not admitted: {result.pending.get(WorkloadId(ids(name)[0]))}")


def racks_of(hosts: Mapping[str, int]) -> set[str]:
    return {host[:4] for host in hosts}


def blocks_of(hosts: Mapping[str, int]) -> set[str]:
    return {host[:2] for host in hosts}


# required ----------------------------------------------------------------------------------


def test_a_pod_set_requiring_a_rack_lands_all_its_pods_in_one_rack() -> None:
    result = run(tas_snapshot(asking(gang("w", 4), required(RACK))))
    hosts = placement(result, "w")
    assert sum(hosts.values()) == 4
    assert len(racks_of(hosts)) == 1


def test_a_required_rack_is_the_fullest_rack_that_still_holds_the_gang() -> None:
    # Rack b0r0 has one free CPU, b0r1 three, b1r0 four: a 3-pod gang takes b0r1 (best
    # fit), leaving the empty rack whole for a later 4-pod gang.
    used = {"b0r0h0": 1, "b0r0h1": 1, "b0r0h2": 1, "b0r1h0": 1, "b1r1h0": 1}
    result = run(tas_snapshot(asking(gang("w", 3), required(RACK)), nodes=fabric(used=used)))
    assert racks_of(placement(result, "w")) == {"b0r1"}


def test_a_required_rack_that_no_rack_holds_waits_naming_the_largest_rack_and_the_shortfall() -> (
    None
):
    used = {"b0r0h0": 1, "b0r1h0": 1, "b0r1h1": 1, "b1r0h0": 1, "b1r1h0": 1}
    result = run(tas_snapshot(asking(gang("w", 4), required(RACK)), nodes=fabric(used=used)))
    reason = reason_of(result, "w")
    assert reason.code is PendingCode.TOPOLOGY_PLACEMENT_FAILED
    assert reason.message.startswith(
        "pod set main needs 4 pods in one rack; the largest free rack (b1r1) holds 3, 1 short"
    )


def test_two_gangs_of_one_cycle_never_count_on_the_same_room() -> None:
    result = run(
        tas_snapshot(
            asking(gang("a", 4).created(1), required(RACK)),
            asking(gang("b", 4).created(2), required(RACK)),
            asking(gang("c", 4).created(3), required(RACK)),
            asking(gang("d", 4).created(4), required(RACK)),
            asking(gang("e", 4).created(5), required(RACK)),
        )
    )
    assert admitted_ids(result) == ids("a", "b", "c", "d")
    taken = [racks_of(placement(result, n)) for n in "abcd"]
    assert sorted(r for rs in taken for r in rs) == ["b0r0", "b0r1", "b1r0", "b1r1"]
    assert reason_of(result, "e").code is PendingCode.TOPOLOGY_PLACEMENT_FAILED


def test_an_admitted_assignment_holds_its_nodes_in_the_next_cycle() -> None:
    first = tas_snapshot(
        asking(gang("a", 4), required(BLOCK)), asking(gang("b", 8).created(1), required(BLOCK))
    )
    result = run(first)
    assert admitted_ids(result) == ids("a", "b")
    later = apply_result(first, result)
    later = dataclasses.replace(
        later,
        workloads={
            **later.workloads,
            WorkloadId("default/c"): asking(gang("c", 5).created(2), required(BLOCK)),
        },
    )
    again = run(later)
    assert admitted_ids(again) == []
    assert "the largest free block (b0) holds 4" in reason_of(again, "c").message


# what counts as free --------------------------------------------------------------------------


def test_cordoned_tainted_and_busy_nodes_hold_no_pods_and_a_node_selector_narrows_the_rest() -> (
    None
):
    nodes = fabric(cordoned=["b0r0h0"], tainted=["b0r0h1"], used={"b0r0h2": 1}, blocks=1, racks=1)
    result = run(tas_snapshot(asking(gang("w", 2), required(RACK)), nodes=nodes))
    assert "holds 1, 1 short" in reason_of(result, "w").message

    tolerating = gang("t", 2).toleration("dedicated", "x")
    assert placement(run(tas_snapshot(asking(tolerating, required(RACK)), nodes=nodes)), "t") == {
        "b0r0h1": 1,
        "b0r0h3": 1,
    }
    pinned = gang("p", 1).node_selector(**{HOST: "b0r0h3"})
    assert placement(run(tas_snapshot(asking(pinned, required(RACK)), nodes=nodes)), "p") == {
        "b0r0h3": 1
    }


def test_pods_of_several_cpus_fit_a_node_as_often_as_every_resource_allows() -> None:
    nodes = fabric(cpu=3, blocks=1, racks=1, hosts=2)
    result = run(tas_snapshot(asking(gang("w", 2, cpu=2), required(RACK)), nodes=nodes))
    assert placement(result, "w") == {"b0r0h0": 1, "b0r0h1": 1}
    result = run(tas_snapshot(asking(gang("w", 3, cpu=2), required(RACK)), nodes=nodes))
    assert "needs 3 pods in one rack; the largest free rack (b0r0) holds 2" in (
        reason_of(result, "w").message
    )


# preferred and unconstrained ---------------------------------------------------------------


def test_a_preferred_rack_too_small_spans_the_fewest_racks_of_one_block() -> None:
    used = {"b0r0h0": 1, "b0r0h1": 1, "b0r0h2": 1}  # b0 has 5 free, b1 has 8
    result = run(tas_snapshot(asking(gang("w", 6), preferred(RACK)), nodes=fabric(used=used)))
    hosts = placement(result, "w")
    assert blocks_of(hosts) == {"b1"}
    assert len(racks_of(hosts)) == 2


def test_a_preferred_block_that_no_block_holds_spans_the_fewest_blocks() -> None:
    nodes = fabric(blocks=3)
    result = run(tas_snapshot(asking(gang("w", 12), preferred(BLOCK)), nodes=nodes))
    hosts = placement(result, "w")
    assert sum(hosts.values()) == 12
    assert len(blocks_of(hosts)) == 2


def test_a_preferred_gang_larger_than_the_whole_topology_waits_saying_how_much_is_free() -> None:
    result = run(tas_snapshot(asking(gang("w", 17), preferred(RACK))))
    message = reason_of(result, "w").message
    assert "needs 17 pods; the nodes of topology fabric have room for 16, 1 short" in message


def test_an_unconstrained_pod_set_fills_the_fullest_nodes_first() -> None:
    nodes = fabric(cpu=2, blocks=1, racks=1, hosts=3, used={"b0r0h1": 1})
    result = run(
        tas_snapshot(asking(gang("w", 2), TopologyRequest(TopologyMode.UNCONSTRAINED)), nodes=nodes)
    )
    assert placement(result, "w") == {"b0r0h1": 1, "b0r0h0": 1}


# slices and groups ------------------------------------------------------------------------------


def test_slices_put_every_slice_in_one_domain_of_the_slice_level() -> None:
    # Block b0 has racks with 3 and 4 free hosts: 2 slices of 2 fit (one per rack) only if
    # counted per rack, not 7 loose pods. 4 slices of 2 do not fit b0 (3//2 + 4//2 = 3).
    used = {"b0r0h0": 1}
    nodes = fabric(used=used)
    ask = required(BLOCK, slice_level=RACK, slice_size=2)
    result = run(tas_snapshot(asking(gang("w", 8), ask), nodes=nodes))
    hosts = placement(result, "w")
    assert blocks_of(hosts) == {"b1"}
    per_rack: dict[str, int] = {}
    for host, pods in hosts.items():
        per_rack[host[:4]] = per_rack.get(host[:4], 0) + pods
    assert all(pods % 2 == 0 for pods in per_rack.values())

    full = {"b1r0h0": 1, **used}
    result = run(tas_snapshot(asking(gang("w", 8), ask), nodes=fabric(used=full)))
    assert "needs 4 slices of 2 pods in one block; the largest free block (b1) holds 3 slices" in (
        reason_of(result, "w").message
    )


def test_pod_sets_of_one_group_share_one_rack() -> None:
    # The leader alone would best-fit rack b0r0 (1 free host), but the workers need 3 more.
    used = {"b0r0h0": 1, "b0r0h1": 1, "b0r0h2": 1}
    leader_workers = (
        wl("lws")
        .queue("q")
        .pod_set("leader", 1)
        .request("cpu", 1)
        .pod_set("workers", 3)
        .request("cpu", 1)
    )
    group = TopologyRequest(TopologyMode.REQUIRED, RACK, group="g")
    result = run(tas_snapshot(asking(leader_workers, group, group), nodes=fabric(used=used)))
    leader, workers = placement(result, "lws", 0), placement(result, "lws", 1)
    assert len(racks_of(leader) | racks_of(workers)) == 1
    assert racks_of(leader) != {"b0r0"}


def test_a_group_shares_the_narrowest_level_any_member_asks_for() -> None:
    # The leader asks for nothing particular; the workers require a rack: both in one rack.
    leader_workers = (
        wl("lws")
        .queue("q")
        .pod_set("leader", 1)
        .request("cpu", 1)
        .pod_set("workers", 3)
        .request("cpu", 1)
    )
    loose = TopologyRequest(TopologyMode.UNCONSTRAINED, group="g")
    rack = TopologyRequest(TopologyMode.REQUIRED, RACK, group="g")
    used = {"b1r0h0": 1, "b1r0h1": 1, "b0r1h0": 1, "b0r1h1": 1, "b1r1h0": 1}
    result = run(tas_snapshot(asking(leader_workers, loose, rack), nodes=fabric(used=used)))
    leader, workers = placement(result, "lws", 0), placement(result, "lws", 1)
    assert racks_of(leader) == racks_of(workers) == {"b0r0"}


# flavors ----------------------------------------------------------------------------------------


def test_a_pod_set_without_a_request_in_a_tas_only_queue_is_placed_unconstrained() -> None:
    result = run(tas_snapshot(gang("w", 3)))
    assert sum(placement(result, "w").values()) == 3


def test_a_flavor_with_a_topology_takes_only_pod_sets_that_ask_for_one_unless_tas_only() -> None:
    snap = tas_snapshot(
        gang("plain", 3), asking(gang("tas", 3), required(RACK)), flavors=(TAS, PLAIN)
    )
    result = run(snap)
    by_name = {a.workload: a.admission.pod_sets[0] for a in result.admitted}
    assert by_name[WorkloadId("default/plain")].flavors[ResourceName("cpu")] == "plain"
    assert by_name[WorkloadId("default/plain")].topology is None
    assert by_name[WorkloadId("default/tas")].flavors[ResourceName("cpu")] == "tas"
    assert by_name[WorkloadId("default/tas")].topology is not None


def test_a_pod_set_asking_for_a_level_the_topology_lacks_matches_no_flavor() -> None:
    result = run(tas_snapshot(asking(gang("w", 1), required("example.com/topology-pod"))))
    reason = reason_of(result, "w")
    assert reason.code is PendingCode.NO_MATCHING_FLAVOR
    assert "topology fabric has no level example.com/topology-pod" in reason.message


# partial admission and preemption ---------------------------------------------------------------


def test_partial_admission_shrinks_a_gang_to_what_one_rack_holds() -> None:
    w = asking(wl("w").queue("q").count(6, min_count=2).request("cpu", 1), required(RACK))
    result = run(tas_snapshot(w))
    assert result.admitted[0].partial
    assert sum(placement(result, "w").values()) == 4


def with_workloads(snap: Snapshot, *workloads: Workload) -> Snapshot:
    return dataclasses.replace(snap, workloads={**snap.workloads, **{w.id: w for w in workloads}})


def test_preemption_frees_one_rack_for_a_gang_and_names_it() -> None:
    # Racks other than b0r0 are full of pods MultiQ did not make; b0r0 runs a low-priority
    # 2-pod workload and has 2 hosts free. A 4-pod gang requiring a rack preempts it.
    others = {f"b{b}r{r}h{h}": 1 for b in (0, 1) for r in (0, 1) for h in range(4)}
    others = {host: 1 for host in others if not host.startswith("b0r0")}
    first = tas_snapshot(
        asking(gang("low", 2), required(RACK)),
        nodes=fabric(used=others),
        preemption=PreemptionPolicy.LOWER_PRIORITY,
    )
    state = apply_result(first, run(first))
    big = asking(gang("big", 4, priority=5).created(50), required(RACK))
    result = run(with_workloads(state, big))
    assert preempted_ids(result) == ids("low")
    reason = reason_of(result, "big")
    assert reason.code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
    assert "(to free rack b0r0)" in reason.message
    assert result.preempted[0].message.endswith("freeing rack b0r0")
    assert racks_of(
        {v[-1]: n for v, n in result.nominated[big.id].pod_sets[0].topology.domains}  # type: ignore[union-attr]
    ) == {"b0r0"}

    after = run(apply_result(with_workloads(state, big), result))
    assert admitted_ids(after) == ids("big")


def test_without_a_preemption_policy_a_gang_waits_for_a_rack_instead() -> None:
    occupant = asking(
        gang("occupant", 16, priority=-1), TopologyRequest(TopologyMode.UNCONSTRAINED)
    )
    first = tas_snapshot(occupant)
    state = apply_result(first, run(first))
    state = dataclasses.replace(
        state,
        workloads={
            **state.workloads,
            WorkloadId("default/big"): asking(gang("big", 4).created(5), required(RACK)),
        },
    )
    result = run(state)
    assert preempted_ids(result) == []
    assert reason_of(result, "big").code is PendingCode.TOPOLOGY_PLACEMENT_FAILED


# the incremental cycle ----------------------------------------------------------------------------


def test_the_incremental_cycle_places_exactly_as_the_full_one_as_work_and_nodes_change() -> None:
    import random

    from agent.engine.carry import Carry
    from agent.engine.cycle import schedule, schedule_incremental

    requests = [required(RACK), required(BLOCK), preferred(RACK), preferred(BLOCK), None]
    for seed in range(6):
        rng = random.Random(seed)
        snap = tas_snapshot(preemption=PreemptionPolicy.LOWER_PRIORITY)
        carry: Carry | None = None
        before: dict[WorkloadId, Workload] = {}
        for step in range(40):
            workloads = dict(snap.workloads)
            for _ in range(rng.randint(0, 3)):
                name = f"w{step}-{rng.randint(0, 10**6)}"
                new = asking(
                    gang(name, rng.randint(1, 8), priority=rng.choice([0, 5])).created(step),
                    rng.choice(requests),
                )
                workloads[new.id] = new
            admitted = [w for w in workloads.values() if w.admission is not None]
            for w in admitted:
                if rng.random() < 0.25:
                    del workloads[w.id]
            nodes = snap.nodes
            if rng.random() < 0.3:
                busy = {f"b{rng.randint(0, 1)}r{rng.randint(0, 1)}h{rng.randint(0, 3)}": 1}
                nodes = fabric(used=busy)
            snap = dataclasses.replace(snap, workloads=workloads, nodes=nodes)
            changed = {
                k for k in before.keys() | workloads.keys() if before.get(k) is not workloads.get(k)
            }
            full = schedule(snap, float(step))
            incremental, carry = schedule_incremental(snap, float(step), carry, changed)
            assert full.admitted == incremental.admitted, (seed, step)
            assert full.preempted == incremental.preempted, (seed, step)
            assert dict(full.pending) == dict(incremental.pending), (seed, step)
            before = dict(snap.workloads)  # what this cycle saw: changes are against it
            snap = apply_result(snap, full)


def test_a_gang_that_fits_no_rack_of_the_first_flavor_takes_the_next_flavors_rack() -> None:
    second = ResourceFlavor(FlavorName("tas2"), {"pool": "tas2"}, topology_name="fabric")
    nodes = fabric(used={"b0r0h0": 1, "b0r1h0": 1, "b1r0h0": 1, "b1r1h0": 1})
    for name, node in fabric(blocks=1, racks=1).items():
        nodes[f"x{name}"] = dataclasses.replace(
            node, name=f"x{name}", labels={**node.labels, HOST: f"x{name}", "pool": "tas2"}
        )
    result = run(
        tas_snapshot(asking(gang("w", 4), required(RACK)), nodes=nodes, flavors=(TAS, second))
    )
    [admit] = result.admitted
    assert admit.admission.pod_sets[0].flavors[ResourceName("cpu")] == "tas2"
    assert set(placement(result, "w")) == {"xb0r0h0", "xb0r0h1", "xb0r0h2", "xb0r0h3"}

    # With no second flavor to fall back on, the gang waits with the first flavor's reason.
    alone = run(tas_snapshot(asking(gang("w", 4), required(RACK)), nodes=nodes))
    assert reason_of(alone, "w").code is PendingCode.TOPOLOGY_PLACEMENT_FAILED
