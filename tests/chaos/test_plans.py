"""What a chaos run plans: a seeded mix of valid workloads over every mode and shape, faults
spread over clusters that fit in the submission window, and each fault's time to recover
read from the pod histories."""

from __future__ import annotations

import copy
import random
from collections import Counter
from pathlib import Path

from api.codec import decode
from api.kinds import REGISTRY
from api.v1alpha1.conversions import to_workload
from e2e.chaos.driver import ChaosConfig
from e2e.chaos.faults import (
    CLUSTER_FAULTS,
    HA_FAULTS,
    PARTITIONS,
    FaultKind,
    FaultRecord,
    PlannedFault,
    aim_at_witnesses,
    plan_faults,
    recovery_seconds,
)
from e2e.chaos.federation import MODES, ChaosFederation, queue_of
from e2e.chaos.invariants import ClusterHistory, PodRun
from e2e.chaos.workloads import SHAPES, plan_workloads

CLUSTERS = ["sim-0", "sim-1", "sim-2"]

# --- workloads ------------------------------------------------------------------------------


def test_the_workload_mix_covers_every_mode_and_shape_and_is_the_same_for_a_seed() -> None:
    first = plan_workloads(300, random.Random(7))
    again = plan_workloads(300, random.Random(7))
    assert first == again
    assert {w.mode for w in first} == set(MODES)
    assert {w.shape for w in first} == set(SHAPES)
    assert {w.pods for w in first} == {1, 2, 3, 4}
    assert len({w.name for w in first}) == 300


def test_a_share_of_the_workloads_is_long_and_the_rest_short() -> None:
    planned = plan_workloads(
        1000, random.Random(1), durations=(2, 8), long_share=0.2, long_durations=(12, 20)
    )
    long = [w for w in planned if w.duration >= 12]
    assert all(2 <= w.duration <= 8 for w in planned if w.duration < 12)
    assert all(w.duration <= 20 for w in long)
    assert 150 <= len(long) <= 250


def test_every_planned_workload_converts_to_a_workload_of_its_pods_in_its_modes_queue() -> None:
    for planned in plan_workloads(60, random.Random(3)):
        source = decode(copy.deepcopy(planned.body), REGISTRY)
        workload = to_workload(source)
        assert workload.spec.queue_name == queue_of(planned.mode)
        assert sum(ps.count for ps in workload.spec.pod_sets) == planned.pods, planned.name
        assert len(workload.metadata.name) <= 63  # it must fit the agent's label value
        template = workload.spec.pod_sets[0].template
        assert template.metadata.annotations["kubesim.dev/duration"] == str(planned.duration)


# --- the fleet ------------------------------------------------------------------------------


def test_the_fleet_is_valid_fenced_with_short_timings_and_has_a_queue_per_mode() -> None:
    fed = ChaosFederation(Path("/nonexistent"), clusters=3, nodes=3)
    for body in fed.fleet_objects():
        decode(copy.deepcopy(body), REGISTRY)  # raises on any field the API refuses
    members = [o for o in fed.fleet_objects() if o["kind"] == "MemberCluster"]
    assert [m["spec"]["fencing"] for m in members] == [
        {"lossTimeoutSeconds": 12, "leaseSeconds": 6, "graceSeconds": 4}
    ] * 3
    policies = {
        o["metadata"]["name"]: o["spec"]["dispatchPolicy"]["type"]
        for o in fed.fleet_objects()
        if o["kind"] == "GlobalQueue"
    }
    assert policies == {queue_of(m): m for m in MODES}


# --- faults ---------------------------------------------------------------------------------


def test_faults_are_planned_as_counted_with_cluster_faults_spread_over_the_clusters() -> None:
    counts = {FaultKind.HUB_KILL: 3, FaultKind.AGENT_KILL: 6, FaultKind.KUBESIM_PAUSE: 2}
    holds = {FaultKind.KUBESIM_PAUSE: 2.0}
    steps = plan_faults(counts, CLUSTERS, holds, random.Random(2))
    assert all(len(step) == 1 for step in steps)
    faults = [f for step in steps for f in step]
    assert Counter(f.kind for f in faults) == counts
    assert Counter(f.target for f in faults if f.kind is FaultKind.AGENT_KILL) == {
        "sim-0": 2,
        "sim-1": 2,
        "sim-2": 2,
    }
    assert all(f.target is None for f in faults if f.kind is FaultKind.HUB_KILL)
    assert {f.hold for f in faults if f.kind is FaultKind.KUBESIM_PAUSE} == {2.0}
    assert steps != plan_faults(counts, CLUSTERS, holds, random.Random(3))


def test_partitions_come_first_two_at_a_time_the_longest_together() -> None:
    counts = {
        FaultKind.AGENT_STOP: 1,
        FaultKind.LINK_BLACKHOLE: 1,
        FaultKind.LINK_CUT: 2,
        FaultKind.HUB_KILL: 2,
    }
    holds = {FaultKind.AGENT_STOP: 60.0, FaultKind.LINK_BLACKHOLE: 60.0, FaultKind.LINK_CUT: 15.0}
    for seed in range(5):
        steps = plan_faults(counts, CLUSTERS, holds, random.Random(seed))
        partitions, rest = steps[:2], steps[2:]
        assert sorted(tuple(sorted(f.kind for f in step)) for step in partitions) == [
            (FaultKind.AGENT_STOP, FaultKind.LINK_BLACKHOLE),
            (FaultKind.LINK_CUT, FaultKind.LINK_CUT),
        ]
        assert [[f.kind for f in step] for step in rest] == [[FaultKind.HUB_KILL]] * 2


def test_the_presets_fit_their_faults_in_the_submission_window() -> None:
    for config in (ChaosConfig.bounded(), ChaosConfig.long()):
        steps = plan_faults(config.faults, CLUSTERS, config.holds, random.Random(config.seed))
        seconds = config.fault_start
        assert config.ha >= 2  # so every fault is injected, HA ones included
        for step in steps:
            seconds += max(f.hold for f in step) + config.fault_gap
            if any(f.kind in PARTITIONS for f in step):
                seconds += 3.0  # the witnesses start
            if any(f.kind in HA_FAULTS for f in step):
                seconds += 1.0  # the leader is looked for, etcd waited for
        # Faults that end after the last submission have nothing to recover with.
        assert seconds < config.submission_seconds - 5, (seconds, config.submission_seconds)
        assert config.workloads >= 300


def test_the_partitions_and_freezes_of_the_presets_outlast_the_loss_timeout() -> None:
    for config in (ChaosConfig.bounded(), ChaosConfig.long()):
        for kind in PARTITIONS:
            assert kind in CLUSTER_FAULTS
            assert config.holds[kind] > config.timings.loss_timeout_seconds


def test_a_steps_partitions_strike_clusters_where_witnesses_run_each_a_different_one() -> None:
    cut, stop = FaultKind.LINK_CUT, FaultKind.AGENT_STOP
    step = [PlannedFault(cut, "sim-0", 15.0), PlannedFault(stop, "sim-0", 60.0)]
    aimed, notes = aim_at_witnesses(step, {"sim-1": "job-w1", "sim-2": "job-w2"}, CLUSTERS)
    assert [(f.kind, f.target) for f in aimed] == [(cut, "sim-1"), (stop, "sim-2")]
    assert notes == ["witness job-w1 ran there", "witness job-w2 ran there"]
    # A fault's own cluster is kept when a witness runs there.
    aimed, _ = aim_at_witnesses(step[:1], {"sim-0": "job-w0", "sim-1": "job-w1"}, CLUSTERS)
    assert aimed[0].target == "sim-0"


def test_when_witnesses_run_out_a_steps_faults_still_strike_different_clusters() -> None:
    cut = FaultKind.LINK_CUT
    step = [PlannedFault(cut, "sim-0", 15.0), PlannedFault(cut, "sim-0", 15.0)]
    aimed, notes = aim_at_witnesses(step, {"sim-0": "job-w0"}, CLUSTERS)
    assert [f.target for f in aimed] == ["sim-0", "sim-1"]
    assert notes == ["witness job-w0 ran there", "no witness ran there before the fault"]
    aimed, _ = aim_at_witnesses(step, {}, CLUSTERS)
    assert [f.target for f in aimed] == ["sim-0", "sim-1"]


def test_recovery_is_the_wait_for_the_next_pod_created_where_the_fault_struck() -> None:
    def created(cluster: str, at: float, workload: str | None = "w") -> PodRun:
        labels = {"multiq.dev/workload-name": workload} if workload else {}
        return PodRun(cluster, "default", f"p{at}", labels, at)

    histories = [
        ClusterHistory("sim-0", [created("sim-0", 5.0), created("sim-0", 30.0)]),
        ClusterHistory("sim-1", [created("sim-1", 12.0), created("sim-1", 14.0, workload=None)]),
    ]
    faults = [
        FaultRecord(FaultKind.AGENT_KILL, "sim-0", 8.0, 10.0),
        FaultRecord(FaultKind.HUB_KILL, None, 8.0, 10.0),
        FaultRecord(FaultKind.LINK_CUT, "sim-1", 11.0, 13.0),
    ]
    measured = recovery_seconds(faults, histories)
    assert [f.recovered_after for f in measured] == [20.0, 2.0, None]
    assert measured[0].to_json(origin=0.0) == {
        "kind": "agent-sigkill",
        "target": "sim-0",
        "at": 8.0,
        "seconds": 2.0,
        "recoveredAfter": 20.0,
    }
