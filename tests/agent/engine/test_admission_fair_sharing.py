"""Admission fair sharing (kueue.md §3.3): within a cluster queue with
`admissionMode: UsageBasedAdmissionFairSharing`, waiting workloads go in order of their local
queue's decayed usage (weighted by resource, divided by the local queue's weight), then
priority and age; usage is sampled with a half-life and an admission adds its entry penalty
at once."""

from __future__ import annotations

import dataclasses
import math

import pytest

import bench.engine_admission_fair_sharing as bench
from agent.engine.apply import apply_result
from agent.engine.fair_usage import (
    LocalQueueUsage,
    admitted_usage,
    alpha,
    penalize,
    requests,
    sample,
    scores,
    usage_score,
    with_usage,
)
from agent.engine.snapshot import (
    AdmissionFairSharing,
    EngineConfig,
    LocalQueueKey,
    ResourceName,
    Snapshot,
)
from tests.builders import admitted_ids, cq, ids, lq, preempted_ids, run, snapshot, wl

AFS = AdmissionFairSharing(usage_half_life_seconds=600.0, usage_sampling_interval_seconds=60.0)
CPU = ResourceName("cpu")
MEMORY = ResourceName("memory")
HEAVY = LocalQueueKey("default/heavy")
LIGHT = LocalQueueKey("default/light")


def _used(cpu: float = 0.0, memory: float = 0.0) -> LocalQueueUsage:
    consumed = {CPU: cpu * 1000, MEMORY: memory * 1000}
    return LocalQueueUsage({r: v for r, v in consumed.items() if v}, {}, 0.0)


def _two_queues(
    *,
    mode: bool = True,
    config: AdmissionFairSharing | None = AFS,
    heavy_weight: float = 1.0,
    light_weight: float = 1.0,
    heavy_priority: int = 0,
    light_priority: int = 0,
    usage: dict[LocalQueueKey, LocalQueueUsage] | None = None,
) -> Snapshot:
    """One cluster queue with room for one workload; each local queue has one waiting, the
    heavy queue's the older."""
    q = cq("cq").quota("cpu", nominal="1").quota("memory", nominal="1")
    if mode:
        q = q.admission_fair_sharing()
    snap = snapshot(
        cqs=[q],
        lqs=[lq("heavy", "cq", weight=heavy_weight), lq("light", "cq", weight=light_weight)],
        workloads=[
            wl("from-heavy").queue("heavy").request("cpu", "1").priority(heavy_priority).created(1),
            wl("from-light").queue("light").request("cpu", "1").priority(light_priority).created(2),
        ],
        config=EngineConfig(admission_fair_sharing=config),
    )
    return with_usage(snap, usage if usage is not None else {HEAVY: _used(cpu=8)})


ORDERING = [
    pytest.param({}, "from-light", id="the light queue's workload goes before the older heavy one"),
    pytest.param(
        {"usage": {}}, "from-heavy", id="with no usage anywhere the older workload goes first"
    ),
    pytest.param(
        {"usage": {HEAVY: _used(cpu=2), LIGHT: _used(cpu=2)}},
        "from-heavy",
        id="equal usage falls back to age",
    ),
    pytest.param(
        {"heavy_priority": 100},
        "from-light",
        id="usage comes before priority",
    ),
    pytest.param(
        {"usage": {HEAVY: _used(cpu=8), LIGHT: _used(cpu=3)}, "heavy_weight": 4.0},
        "from-heavy",
        id="a local queue's weight divides its usage (8/4 < 3/1)",
    ),
    pytest.param(
        {"usage": {}, "heavy_weight": 0.0},
        "from-light",
        id="a local queue of weight 0 always goes last",
    ),
    pytest.param(
        {
            "usage": {HEAVY: _used(cpu=8), LIGHT: _used(memory=1)},
            "config": dataclasses.replace(AFS, resource_weights={CPU: 0.0}),
        },
        "from-heavy",
        id="a resource weighed 0 does not count",
    ),
    pytest.param(
        {"mode": False},
        "from-heavy",
        id="a cluster queue without the admission mode ignores usage",
    ),
    pytest.param(
        {"config": None},
        "from-heavy",
        id="without the admissionFairSharing configuration no queue orders by usage",
    ),
]


@pytest.mark.parametrize(("setup", "first"), ORDERING)
def test_which_local_queue_goes_first(setup: dict[str, object], first: str) -> None:
    result = run(_two_queues(**setup))  # type: ignore[arg-type]
    assert admitted_ids(result) == ids(first)


def test_the_usage_order_is_only_within_the_cluster_queue_entries_across_queues_keep_theirs() -> (
    None
):
    # Two cluster queues sharing a cohort's one cpu: the head of each queue competes by
    # priority and age as before; usage orders only inside "afs".
    afs = cq("afs").cohort("co").quota("cpu", nominal="0", borrowing="1").admission_fair_sharing()
    plain = cq("plain").cohort("co").quota("cpu", nominal="1")
    snap = snapshot(
        cqs=[afs, plain],
        lqs=[lq("heavy", "afs"), lq("light", "afs")],
        workloads=[
            wl("plain-old").queue("plain").request("cpu", "1").created(0),
            wl("from-heavy").queue("heavy").request("cpu", "1").created(1),
            wl("from-light").queue("light").request("cpu", "1").created(2),
        ],
        config=EngineConfig(admission_fair_sharing=AFS),
    )
    result = run(with_usage(snap, {HEAVY: _used(cpu=8)}))
    assert admitted_ids(result) == ids("plain-old")
    routed = [w.id for w in result.routed["afs"]]  # type: ignore[index]
    assert routed == ids("from-light") + ids("from-heavy")


# --- the arithmetic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "half_life", "expected"),
    [
        pytest.param(600.0, 600.0, 0.5, id="one half-life weighs the present half"),
        pytest.param(1200.0, 600.0, 0.75, id="two half-lives three quarters"),
        pytest.param(0.0, 600.0, 0.0, id="no time no weight"),
        pytest.param(60.0, 0.0, 0.0, id="no half-life no weight"),
    ],
)
def test_alpha(elapsed: float, half_life: float, expected: float) -> None:
    assert alpha(elapsed, half_life) == pytest.approx(expected)


def test_a_local_queue_seen_first_starts_at_zero_from_now() -> None:
    out = sample({}, [HEAVY], {HEAVY: {CPU: 4000}}, 50.0, AFS)
    assert out == {HEAVY: LocalQueueUsage({}, {}, 50.0)}


def test_usage_is_not_sampled_again_before_the_interval() -> None:
    before = LocalQueueUsage({CPU: 4000.0}, {CPU: 100.0}, 100.0)
    out = sample({HEAVY: before}, [HEAVY], {}, 159.0, AFS)
    assert out[HEAVY] is before


def test_idle_usage_halves_every_half_life_and_penalties_settle() -> None:
    before = LocalQueueUsage({CPU: 4000.0}, {CPU: 100.0}, 0.0)
    out = sample({HEAVY: before}, [HEAVY], {}, 600.0, AFS)[HEAVY]
    assert out.consumed[CPU] == pytest.approx(2000.0)
    assert out.penalty == {}
    assert out.last_update == 600.0


def test_steady_usage_converges_to_what_is_admitted() -> None:
    usage: dict[LocalQueueKey, LocalQueueUsage] = {HEAVY: LocalQueueUsage(last_update=0.0)}
    for minute in range(1, 121):
        usage = sample(usage, [HEAVY], {HEAVY: {CPU: 3000}}, minute * 60.0, AFS)
    # Two hours at half-life ten minutes: within 2^-12 of the admitted usage.
    assert usage[HEAVY].consumed[CPU] == pytest.approx(3000.0, rel=1e-3)


def test_a_queue_no_longer_configured_is_dropped_and_no_half_life_keeps_usage_at_zero() -> None:
    before = {HEAVY: LocalQueueUsage({CPU: 4000.0}, {}, 0.0), LIGHT: LocalQueueUsage()}
    no_half_life = dataclasses.replace(AFS, usage_half_life_seconds=0.0)
    out = sample(before, [HEAVY], {HEAVY: {CPU: 1000}}, 600.0, no_half_life)
    assert out == {HEAVY: LocalQueueUsage({}, {}, 600.0)}


def test_the_entry_penalty_is_the_requests_weighted_by_one_sampling_interval() -> None:
    w = wl("big").queue("heavy").count(3).request("cpu", "2").build()
    assert requests(w) == {CPU: 6000}
    out = penalize(LocalQueueUsage(), requests(w), AFS)
    assert out.penalty[CPU] == pytest.approx(6000 * alpha(60.0, 600.0))
    assert usage_score(out, AFS, 1.0) == pytest.approx(6 * alpha(60.0, 600.0))


def test_the_score_weighs_resources_and_divides_by_the_queue_weight() -> None:
    weights = dataclasses.replace(AFS, resource_weights={CPU: 2.0})
    usage = LocalQueueUsage({CPU: 3000.0, MEMORY: 4000.0}, {CPU: 500.0}, 0.0)
    assert usage_score(usage, weights, 2.0) == pytest.approx((2 * 3.5 + 4) / 2)
    assert usage_score(usage, weights, 0.0) == math.inf


def test_only_local_queues_of_cluster_queues_in_the_mode_get_a_score() -> None:
    snap = snapshot(
        cqs=[cq("afs").admission_fair_sharing(), cq("plain")],
        lqs=[lq("heavy", "afs"), lq("other", "plain")],
        config=EngineConfig(admission_fair_sharing=AFS),
    )
    assert set(scores(snap, {})) == {HEAVY, LocalQueueKey("default/afs")}


# --- over cycles ---------------------------------------------------------------------------


def test_entry_penalties_make_two_equal_queues_take_turns() -> None:
    # Room for one at a time; each cycle admits one, finishes it, and the penalty of the
    # admission sends the next turn to the other queue (no sample in between).
    q = cq("cq").quota("cpu", nominal="1").admission_fair_sharing()
    waiting = [wl(f"a{i}").queue("heavy").request("cpu", "1").created(i) for i in range(3)]
    waiting += [wl(f"b{i}").queue("light").request("cpu", "1").created(10 + i) for i in range(3)]
    snap = snapshot(
        cqs=[q],
        lqs=[lq("heavy", "cq"), lq("light", "cq")],
        workloads=waiting,
        config=EngineConfig(admission_fair_sharing=AFS),
    )
    usage: dict[LocalQueueKey, LocalQueueUsage] = {
        HEAVY: LocalQueueUsage(last_update=0.0),
        LIGHT: LocalQueueUsage(last_update=0.0),
    }
    order: list[str] = []
    for _ in range(6):
        result = run(with_usage(snap, usage), now=1.0)
        (admit,) = result.admitted
        order.append(admit.workload.removeprefix("default/"))
        admitted = snap.workloads[admit.workload]
        usage[admitted.local_queue] = penalize(usage[admitted.local_queue], requests(admitted), AFS)
        snap = apply_result(snap, result)
        workloads = dict(snap.workloads)
        del workloads[admit.workload]  # finished
        snap = dataclasses.replace(snap, workloads=workloads)
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_admitted_usage_sums_each_local_queues_admissions_per_resource() -> None:
    snap = snapshot(
        cqs=[cq("cq").quota("cpu", "f1", nominal="8").quota("cpu", "f2", nominal="8")],
        lqs=[lq("heavy", "cq")],
        workloads=[
            wl("one").queue("heavy").request("cpu", "2").admitted("cq", "f1"),
            wl("two").queue("heavy").request("cpu", "3").admitted("cq", "f2"),
            wl("waiting").queue("heavy").request("cpu", "5"),
        ],
    )
    assert admitted_usage(snap.workloads.values()) == {HEAVY: {CPU: 5000}}


def test_the_benchmark_sends_the_light_queue_first_and_flips_back_at_the_analytic_time() -> None:
    report = bench.run(300.0, cpus=4, heavy_for=1800.0)
    assert report["light_first"] is True
    assert report["within_one_sampling_interval"] is True
    analytic = bench.analytic_crossover(300.0, 1800.0)
    assert analytic == pytest.approx(300.0 * math.log2(2 - 2**-6))


def _preempting(*, mode: bool, usage: dict[LocalQueueKey, LocalQueueUsage]) -> Snapshot:
    """Two admitted workloads of equal priority fill a cluster queue, the light queue's the
    newer; an urgent one needs one of them gone."""
    q = cq("cq").quota("cpu", nominal="2").preemption(within="LowerPriority")
    if mode:
        q = q.admission_fair_sharing()
    snap = snapshot(
        cqs=[q],
        lqs=[lq("heavy", "cq"), lq("light", "cq"), lq("urgent", "cq")],
        workloads=[
            wl("run-heavy").queue("heavy").request("cpu", "1").created(1).admitted("cq", at=10),
            wl("run-light").queue("light").request("cpu", "1").created(2).admitted("cq", at=20),
            wl("urgent").queue("urgent").request("cpu", "1").priority(100).created(30),
        ],
        config=EngineConfig(admission_fair_sharing=AFS),
    )
    return with_usage(snap, usage)


VICTIMS = [
    pytest.param(
        True,
        {HEAVY: _used(cpu=8)},
        "run-heavy",
        id="the heavier local queue's workload is preempted first",
    ),
    pytest.param(
        True,
        {HEAVY: _used(cpu=1), LIGHT: _used(cpu=8)},
        "run-light",
        id="whichever local queue is heavier",
    ),
    pytest.param(True, {}, "run-light", id="equal usage falls back to the most recently admitted"),
    pytest.param(
        False,
        {HEAVY: _used(cpu=8)},
        "run-light",
        id="without the mode usage does not count: the most recently admitted goes",
    ),
]


@pytest.mark.parametrize(("mode", "usage", "victim"), VICTIMS)
def test_which_admitted_workload_is_preempted_within_the_cluster_queue(
    mode: bool, usage: dict[LocalQueueKey, LocalQueueUsage], victim: str
) -> None:
    result = run(_preempting(mode=mode, usage=usage))
    assert preempted_ids(result) == ids(victim)
