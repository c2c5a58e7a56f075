"""The incremental cycle (`schedule_incremental`, carrying each queue's order between cycles
and skipping memoised tails) decides exactly as the look-at-everything cycle (`schedule`),
step by step over seeded random streams of arrivals, finishes, priority changes,
deactivations, backoffs and quota changes, in cohorts with borrowing, preemption and
protection, with admission fair sharing on or off (its usage decaying and penalised as the
agent does, so queue order moves between cycles); and over a deep queue it looks at what
changed, not at what waits."""

from __future__ import annotations

import dataclasses
import random

import pytest

from agent.engine.apply import apply_result
from agent.engine.carry import Carry
from agent.engine.cycle import _Pending, schedule, schedule_incremental
from agent.engine.fair_usage import (
    LocalQueueUsage,
    admitted_usage,
    penalize,
    requests,
    sample,
    with_usage,
)
from agent.engine.result import CycleResult
from agent.engine.snapshot import (
    AdmissionFairSharing,
    EngineConfig,
    FairSharing,
    FairSharingStrategy,
    LocalQueueKey,
    Namespace,
    Snapshot,
    WaitForPodsReady,
    Workload,
    WorkloadId,
)
from tests.builders import CQBuilder, cohort, cq, lq, snapshot, wl

FAIR = [
    FairSharing(),
    FairSharing((FairSharingStrategy.LESS_THAN_INITIAL_SHARE,)),
    FairSharing((FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)),
]
TOWARD_FAIR_SHARE = [FairSharing((FairSharingStrategy.TOWARD_FAIR_SHARE,))]
AFS = AdmissionFairSharing(usage_half_life_seconds=4.0, usage_sampling_interval_seconds=1.0)


def _config(
    rng: random.Random,
    snap_workloads: dict[WorkloadId, Workload],
    afs: bool = False,
    fair: list[FairSharing] | None = None,
) -> Snapshot:
    """A random cohort tree with borrowing, queues with random policies, and `snap_workloads`;
    with `afs`, admission fair sharing configured and most queues ordering by usage; with
    `fair`, preemption-based fair sharing with random weights (0 included) and one of
    these strategy lists."""
    cohorts = [cohort("co0").quota("cpu", nominal=str(rng.randint(0, 4)))]
    if rng.random() < 0.5:
        cohorts.append(
            cohort("co1").parent("co0").quota("cpu", nominal="2", borrowing=str(rng.randint(0, 6)))
        )
    cqs: list[CQBuilder] = []
    for i in range(3):
        q = cq(f"q{i}")
        if rng.random() < 0.8:
            q.cohort(rng.choice([c.name for c in cohorts]))
        for flv in ("f1", "f2")[: rng.randint(1, 2)]:
            q.quota(
                "cpu",
                flv,
                nominal=str(rng.randint(0, 6)),
                borrowing=str(rng.randint(0, 6)) if q._cohort and rng.random() < 0.5 else None,
                lending=str(rng.randint(0, 4)) if q._cohort and rng.random() < 0.3 else None,
            )
        q.preemption(
            within=rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
            reclaim=rng.choice(["Never", "LowerPriority", "Any"]),
            borrow_within=rng.choice(["Never", "LowerPriority"]),
            min_admit=rng.choice([0.0, 0.0, 0.0, 1.5]),
        )
        if rng.random() < 0.2:
            q.strict_fifo()
        if rng.random() < 0.1:
            q.namespace_selector({"team": "a"})
        if afs and rng.random() < 0.8:
            q.admission_fair_sharing()
        if fair:
            q.weight(rng.choice([0.0, 1.0, 1.0, 2.0, 4.0]))
        if rng.random() < 0.03:
            q.stop("HoldAndDrain")  # (after a quota change: its admitted ones are evicted)
        cqs.append(q)
    ready = WaitForPodsReady(
        enabled=rng.random() < 0.2, timeout_seconds=3.0, block_admission=rng.random() < 0.5
    )
    config = EngineConfig(
        wait_for_pods_ready=ready,
        max_admissions_per_queue=rng.choice([None, None, None, 1, 2]),
        admission_fair_sharing=AFS if afs else None,
        fair_sharing=rng.choice(fair) if fair else None,
    )
    # Mostly stopped; open now and then, so that a later drain has admitted work to evict.
    stop = rng.choice(["Hold", "Hold", "HoldAndDrain", "None"])
    lqs = [lq("stopped", rng.choice(["q0", "q2"]), stop=stop), lq("q0", "q0", namespace="b")]
    lqs += [lq("q0-light", "q0", weight=rng.choice([1.0, 2.0])), lq("q1-light", "q1")]
    base = snapshot(
        cqs=cqs,
        cohorts=cohorts,
        lqs=lqs,
        namespaces={"default": {"team": "a"}, "b": {"team": "b"}},
        config=config,
    )
    return dataclasses.replace(base, workloads=dict(snap_workloads))


def _arrival(rng: random.Random, n: int, now: float, odd: float) -> Workload:
    # Few shapes, so memoised tails form; with probability `odd` something that stops one
    # (a distinct shape, a backoff, another namespace, a stopped or missing queue).
    b = (
        wl(f"w{n}")
        .queue(rng.choice(["q0", "q0", "q1", "q2", "q0-light", "q1-light"]))
        .request("cpu", rng.choice(["1", "1", "2"]))
        .priority(rng.choice([0, 0, 5]))
        .created(now)
    )
    if rng.random() < odd:
        b.ns(rng.choice(["default", "b"]))
        b.queue(rng.choice(["q0", "q1", "q2", "stopped", "nowhere"]))
        b.request("cpu", rng.choice(["500m", str(rng.randint(1, 9))]))
        b.priority(rng.choice([1, 2, 3]))
    if rng.random() < odd:
        count = rng.randint(2, 4)
        b.count(count, rng.randint(1, count))
    if rng.random() < odd / 3:
        b.set(active=False)
    if rng.random() < odd:
        b.set(requeue_after=now + rng.choice([0.5, 2.0]))
    if rng.random() < odd:
        b.set(arrived_at=now + 0.25)
    if rng.random() < odd:
        b.set(max_execution_seconds=rng.choice([1, 2, 5]))
    return b.build()


def _events(
    rng: random.Random, snap: Snapshot, now: float, n: int, odd: float
) -> tuple[Snapshot, int]:
    """Random arrivals, finishes, priority changes, deactivations, pods becoming ready and
    losing readiness, and admission times unknown."""
    wls = dict(snap.workloads)
    for _ in range(rng.choice([0, 1, 1, 2, 8, 20])):
        new = _arrival(rng, n, now, odd)
        n += 1
        wls[new.id] = new
    for wid, w in list(wls.items()):
        roll = rng.random()
        if w.admission is not None:
            if roll < 0.25:
                del wls[wid]  # finished: its quota is free
            elif roll < 0.35:
                wls[wid] = dataclasses.replace(w, pods_ready=True)
            elif roll < 0.38:
                wls[wid] = dataclasses.replace(w, evicting=True)  # its pods are going
            elif roll < 0.40:
                wls[wid] = dataclasses.replace(w, active=False)  # deactivated while admitted
            elif roll < 0.42 and w.pods_ready:
                wls[wid] = dataclasses.replace(w, pods_ready=False, pods_ready_lost_at=now)
            elif roll < 0.43:
                wls[wid] = dataclasses.replace(w, admitted_at=None)
        elif roll < 0.03:
            wls[wid] = dataclasses.replace(w, priority=w.priority + 3)  # a new order key
        elif roll < 0.04:
            wls[wid] = dataclasses.replace(w, active=not w.active)
    return dataclasses.replace(snap, workloads=wls), n


def _changed(before: Snapshot, after: Snapshot) -> set[WorkloadId]:
    old, new = before.workloads, after.workloads
    out = {k for k, v in new.items() if old.get(k) is not v}
    out.update(k for k in old if k not in new)
    return out


def _same(full: CycleResult, inc: CycleResult) -> None:
    assert inc.admitted == full.admitted
    assert inc.preempted == full.preempted
    assert sorted(inc.evicted, key=lambda e: e.workload) == sorted(
        full.evicted, key=lambda e: e.workload
    )
    assert len(inc.pending) == len(full.pending)
    assert dict(inc.pending) == dict(full.pending)
    assert all(inc.pending[k] == reason for k, reason in full.pending.items())
    assert all(inc.pending.get(k) == reason for k, reason in full.pending.items())
    admitted_or_gone = [WorkloadId("nobody/none"), *(a.workload for a in full.admitted)]
    assert all(inc.pending.get(k) is None for k in admitted_or_gone if k not in full.pending)
    assert inc.new_preemptors == full.new_preemptors
    assert inc.nominated == full.nominated
    assert inc.next_wakeup == full.next_wakeup
    assert {k: [w.id for w in v] for k, v in inc.routed.items() if v} == {
        k: [w.id for w in v] for k, v in full.routed.items()
    }


def _carry_sums_hold(carry: Carry) -> None:
    """The carry's per-queue groups, usage sums and evicting counts, kept as workloads came and
    went, equal the ones counted again from its running workloads."""
    groups: dict[str, set[WorkloadId]] = {}
    usage: dict[str, dict[object, int]] = {}
    evicting: dict[str, int] = {}
    for running in carry.running.values():
        assert running.admission is not None
        name = running.admission.cluster_queue
        groups.setdefault(name, set()).add(running.id)
        total = usage.setdefault(name, {})
        for fr, amount in running.admission.total.items():
            total[fr] = total.get(fr, 0) + amount
        if running.evicting:
            evicting[name] = evicting.get(name, 0) + 1
    assert {k: set(v) for k, v in carry.admitted.items()} == groups
    kept = {k: {fr: n for fr, n in v.items() if n} for k, v in carry.usage.items()}
    assert kept == {k: {fr: n for fr, n in v.items() if n} for k, v in usage.items()}
    assert carry.evicting == evicting


def _run_stream(
    seed: int,
    steps: int = 40,
    afs: bool = False,
    fair: list[FairSharing] | None = None,
    evicted_for: set[str] | None = None,
) -> int:
    """One stream; returns how many cycles skipped a tail, and adds to `evicted_for` the
    reasons of its evictions. With `afs`, each cycle's snapshot
    carries the local queues' usage as the agent keeps it: sampled, then penalised by the
    cycle's admissions."""
    rng = random.Random(seed)
    odd = rng.choice([0.0, 0.02, 0.1, 0.3])
    snap = _config(rng, {}, afs, fair)
    usage: dict[LocalQueueKey, LocalQueueUsage] = {}
    carry: Carry | None = None
    previous: CycleResult | None = None
    now, n, skipped = 0.0, 0, 0
    last = snap  # what the last cycle saw: `changed` is counted from it
    for step in range(steps):
        if step and rng.random() < 0.08:
            # A quota change: a new configuration.
            snap = _config(rng, dict(snap.workloads), afs, fair)
        snap, n = _events(rng, snap, now, n, odd)
        if afs:
            held = admitted_usage(snap.workloads.values())
            usage = sample(usage, snap.local_queues, held, now, AFS)
            snap = with_usage(snap, usage)
        changed = _changed(last, snap)
        full = schedule(snap, now)
        inc, carry = schedule_incremental(
            snap, now, carry, None if rng.random() < 0.05 else changed
        )
        _same(full, inc)
        if evicted_for is not None:
            evicted_for.update(e.reason.value for e in inc.evicted)
        _carry_sums_hold(carry)
        assert isinstance(inc.pending, _Pending)
        skipped += bool(inc.pending.tails)
        if inc.pending_changed is not None:
            assert previous is not None
            moved = {
                k
                for k, reason in full.pending.items()
                if k in changed or previous.pending.get(k) != reason
            }
            named = inc.pending_changed.keys()
            assert moved <= named, (seed, step, moved - named)
            assert all(full.pending.get(k) == r for k, r in inc.pending_changed.items())
        previous, last = full, snap
        for admit in full.admitted if afs else ():
            admitted = snap.workloads[admit.workload]
            key = admitted.local_queue
            usage[key] = penalize(usage.get(key, LocalQueueUsage()), requests(admitted), AFS)
        snap = apply_result(snap, full)
        now += rng.choice([0.25, 0.5, 1.0])
    return skipped


@pytest.mark.parametrize("block", range(4))
def test_the_incremental_cycle_decides_as_the_full_cycle_over_random_streams(block: int) -> None:
    skipped = sum(_run_stream(seed) for seed in range(block * 25, block * 25 + 25))
    assert skipped > 0, "no stream exercised a skipped tail"


def test_the_streams_evict_for_every_reason_the_carry_indexes() -> None:
    """The equivalence above covers evictions only if the streams make some: deactivated,
    drained, past their maximum execution time, pods not ready (again) in time."""
    seen: set[str] = set()
    for seed in range(12):
        _run_stream(seed, evicted_for=seen)
    assert seen >= {"Deactivated", "MaximumExecutionTimeExceeded", "PodsReadyTimeout"}, seen
    assert seen & {"ClusterQueueStopped", "LocalQueueStopped"}, seen


@pytest.mark.parametrize("block", range(2))
def test_the_incremental_cycle_decides_as_the_full_cycle_with_admission_fair_sharing(
    block: int,
) -> None:
    skipped = sum(_run_stream(seed, afs=True) for seed in range(block * 25, block * 25 + 25))
    assert skipped > 0, "no stream exercised a skipped tail"


@pytest.mark.parametrize("block", range(2))
def test_the_incremental_cycle_decides_as_the_full_cycle_with_fair_sharing(block: int) -> None:
    skipped = sum(_run_stream(seed, fair=FAIR) for seed in range(block * 25, block * 25 + 25))
    assert skipped > 0, "no stream exercised a skipped tail"


@pytest.mark.parametrize("block", range(2))
def test_the_incremental_cycle_decides_as_the_full_cycle_with_toward_fair_share(
    block: int,
) -> None:
    seeds = range(block * 25, block * 25 + 25)
    skipped = sum(_run_stream(seed, fair=TOWARD_FAIR_SHARE) for seed in seeds)
    assert skipped > 0, "no stream exercised a skipped tail"


def _deep(n: int) -> Snapshot:
    workloads = [wl("run0").queue("q0").request("cpu", "4").admitted("q0", at=0.0)]
    workloads += [wl(f"w{i}").queue("q0").request("cpu", "1").created(float(i)) for i in range(n)]
    return snapshot(cqs=[cq("q0").quota("cpu", nominal="4")], workloads=workloads)


def test_a_deep_queue_cycle_looks_at_one_workload_per_shape_and_reports_what_changed() -> None:
    snap = _deep(2_000)
    _, carry = schedule_incremental(snap, 1.0)
    # The running workload finishes: four are admitted, the rest wait as before.
    finished = dataclasses.replace(snap, workloads=dict(snap.workloads))
    del finished.workloads[WorkloadId("default/run0")]  # type: ignore[attr-defined]
    result, carry = schedule_incremental(finished, 2.0, carry, {WorkloadId("default/run0")})
    assert [a.workload for a in result.admitted] == [f"default/w{i}" for i in range(4)]
    pending = result.pending
    assert isinstance(pending, _Pending)
    # The first to fail and the first the memo answered for; the rest is one tail.
    assert len(pending.explicit) == 2
    assert len(pending) == 2_000 - 4
    assert result.pending_changed == {}  # the same reason as last cycle, for all
    assert dict(pending) == dict(schedule(finished, 2.0).pending)


def test_when_a_deep_queue_s_amounts_move_every_waiting_one_is_named_with_its_new_reason() -> None:
    workloads = [wl("run0").queue("q0").request("cpu", "4").admitted("q0", at=0.0)]
    workloads += [wl(f"w{i}").queue("q0").request("cpu", "2").created(float(i)) for i in range(500)]
    snap = snapshot(cqs=[cq("q0").quota("cpu", nominal="4")], workloads=workloads)
    first, carry = schedule_incremental(snap, 1.0)
    # A smaller workload runs instead: one CPU is free, still too little for any of them.
    smaller = wl("run1").queue("q0").request("cpu", "3").admitted("q0", at=1.5).build()
    running = {k: v for k, v in snap.workloads.items() if k != "default/run0"}
    moved = dataclasses.replace(snap, workloads={**running, smaller.id: smaller})
    result, _ = schedule_incremental(moved, 2.0, carry, {WorkloadId("default/run0"), smaller.id})
    full = schedule(moved, 2.0).pending
    assert result.admitted == ()
    assert isinstance(result.pending, _Pending) and result.pending.tails  # (not looked at)
    assert result.pending_changed is not None
    assert set(result.pending_changed) == set(full)
    assert all(
        full[k] == reason != first.pending[k] for k, reason in result.pending_changed.items()
    )


def test_a_new_arrival_ahead_of_a_deep_queue_is_among_the_changed_and_the_rest_is_not() -> None:
    snap = _deep(500)
    _, carry = schedule_incremental(snap, 1.0)
    urgent = wl("urgent").queue("q0").request("cpu", "1").priority(9).created(5.0).build()
    snap = dataclasses.replace(snap, workloads={**snap.workloads, urgent.id: urgent})
    result, _ = schedule_incremental(snap, 2.0, carry, {urgent.id})
    assert result.pending_changed == {urgent.id: schedule(snap, 2.0).pending[urgent.id]}
    assert dict(result.pending) == dict(schedule(snap, 2.0).pending)


def test_a_carry_built_for_another_configuration_is_rebuilt() -> None:
    snap = _deep(50)
    _, carry = schedule_incremental(snap, 1.0)
    more = dataclasses.replace(snap, cluster_queues={**snap.cluster_queues})
    result, carry = schedule_incremental(more, 2.0, carry, set())
    assert result.pending_changed is None
    assert dict(result.pending) == dict(schedule(more, 2.0).pending)
    assert Namespace("default") not in more.namespaces
