"""Property tests (hypothesis): quota is never exceeded, preemptions always make room, and
admitting then finishing a workload restores usage exactly."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.engine.apply import apply_result, finish
from agent.engine.cycle import _Cycle, schedule
from agent.engine.quota import QuotaNode, QuotaTree
from agent.engine.snapshot import Snapshot, WorkloadId
from tests.builders import CohortBuilder, CQBuilder, WorkloadBuilder, cohort, cq, snapshot, wl

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scenarios(draw: st.DrawFn) -> Snapshot:
    """A random cohort tree (maybe with cohort quota and limits) and random workloads."""
    n_cohorts = draw(st.integers(0, 3))
    cohorts: list[CohortBuilder] = []
    names = [f"co{i}" for i in range(n_cohorts)]
    for i, name in enumerate(names):
        c = cohort(name)
        if i > 0 and draw(st.booleans()):
            c.parent(names[draw(st.integers(0, i - 1))])
        has_parent = c._parent is not None
        own = draw(st.integers(0, 6))
        c.quota(
            "cpu",
            nominal=str(own),
            borrowing=str(draw(st.integers(0, 8))) if has_parent and draw(st.booleans()) else None,
            lending=str(draw(st.integers(0, 8))) if has_parent and draw(st.booleans()) else None,
        )
        cohorts.append(c)
    cqs: list[CQBuilder] = []
    for i in range(draw(st.integers(1, 4))):
        q = cq(f"q{i}")
        in_cohort = bool(names) and draw(st.booleans())
        if in_cohort:
            q.cohort(names[draw(st.integers(0, len(names) - 1))])
        for flv in ("f1", "f2")[: draw(st.integers(1, 2))]:
            q.quota(
                "cpu",
                flv,
                nominal=str(draw(st.integers(0, 8))),
                borrowing=str(draw(st.integers(0, 6)))
                if in_cohort and draw(st.booleans())
                else None,
                lending=str(draw(st.integers(0, 6))) if in_cohort and draw(st.booleans()) else None,
            )
        q.preemption(
            within=draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
            reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            borrow_within=draw(st.sampled_from(["Never", "LowerPriority"])),
            threshold=draw(st.none() | st.integers(0, 5)),
        )
        if draw(st.booleans()):
            q.fungibility(
                when_can_borrow=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
                when_can_preempt=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
            )
        if draw(st.booleans()):
            q.strict_fifo()
        cqs.append(q)
    workloads: list[WorkloadBuilder] = []
    for i in range(draw(st.integers(1, 12))):
        w = (
            wl(f"w{i}")
            .queue(f"q{draw(st.integers(0, len(cqs) - 1))}")
            .request("cpu", str(draw(st.integers(1, 5))))
            .priority(draw(st.integers(0, 5)))
            .created(float(i))
        )
        count = draw(st.integers(1, 3))
        w.count(count, draw(st.none() | st.integers(1, count)))
        workloads.append(w)
    return snapshot(cqs=cqs, cohorts=cohorts, workloads=workloads)


def assert_within_quota(snap: Snapshot) -> None:
    """Every node respects its limits and nobody eats into another's guaranteed quota."""
    tree = QuotaTree.from_snapshot(snap)
    nodes: list[QuotaNode] = [*tree.cqs.values(), *tree.cohorts.values()]
    for node in nodes:
        for fr, used in node.usage.items():
            guaranteed = node.guaranteed.get(fr, 0)
            if node.parent is None:
                assert used <= node.subtree.get(fr, 0), (node, fr)
            limit = node.borrowing_limit.get(fr)
            if limit is not None and node.parent is not None:
                in_parent = max(0, used - guaranteed)
                assert in_parent <= node.subtree.get(fr, 0) - guaranteed + limit, (node, fr)
    for node in tree.cqs.values():
        for fr in node.nominal:
            assert tree.available(node, fr) >= 0, (node, fr)


@PROPS
@given(scenarios(), st.integers(1, 4))
def test_usage_never_exceeds_what_the_quota_tree_allows(snap: Snapshot, cycles: int) -> None:
    now = 10.0
    for step in range(cycles):
        result = schedule(snap, now)
        snap = apply_result(snap, result)
        assert_within_quota(snap)
        # Finish a few admitted workloads so the next cycle sees released quota.
        done = sorted(w.id for w in snap.workloads.values() if w.admission is not None)
        snap = finish(snap, *done[step % 2 :: 2])
        now += 1.0


@PROPS
@given(scenarios())
def test_a_preemption_always_lets_its_preemptor_fit(snap: Snapshot) -> None:
    # Admit what fits first, then raise everyone still pending to a high priority.
    snap = apply_result(snap, schedule(snap, 1.0))
    wls = {
        k: dataclasses.replace(w, priority=w.priority + 10) if w.admission is None else w
        for k, w in snap.workloads.items()
    }
    snap = dataclasses.replace(snap, workloads=wls)
    result = schedule(snap, 2.0)
    for p in result.preempted:
        assert p.preemptor in result.nominated
    # Once the victims are gone, admissions and every nominated preemptor fit together.
    after = apply_result(snap, dataclasses.replace(result, new_preemptors=frozenset()))
    wls = dict(after.workloads)
    for wid, admission in result.nominated.items():
        wls[wid] = dataclasses.replace(wls[wid], admission=admission)
    assert_within_quota(dataclasses.replace(after, workloads=wls))


@PROPS
@given(scenarios())
def test_admitting_then_finishing_restores_usage_exactly(snap: Snapshot) -> None:
    before = apply_result(snap, schedule(snap, 1.0))
    usage_before = _usage(before)
    result = schedule(before, 2.0)
    after = apply_result(
        before, dataclasses.replace(result, preempted=(), new_preemptors=frozenset())
    )
    restored = finish(after, *(a.workload for a in result.admitted))
    # Finishing removes the workloads; put the pending copies back to compare like with like.
    wls = dict(restored.workloads)
    for a in result.admitted:
        wls[a.workload] = before.workloads[WorkloadId(a.workload)]
    assert _usage(dataclasses.replace(restored, workloads=wls)) == usage_before


def _usage(snap: Snapshot) -> dict[str, dict[object, int]]:
    tree = QuotaTree.from_snapshot(snap)
    out: dict[str, dict[object, int]] = {}
    for node in [*tree.cqs.values(), *tree.cohorts.values()]:
        out[("cq:" if node.is_cq else "co:") + node.name] = {
            fr: v for fr, v in node.usage.items() if v
        }
    return out


@PROPS
@given(scenarios(), st.randoms(use_true_random=False))
def test_usage_added_as_one_sum_per_queue_equals_usage_added_workload_by_workload(
    snap: Snapshot, rnd: random.Random
) -> None:
    # A cycle puts each queue's summed usage on the tree at once: what a node passes up to
    # its parent depends only on its total, so the order and grouping of additions cannot
    # matter. Checked against adding workload by workload, in a random order.
    admitted = apply_result(snap, schedule(snap, 1.0))
    one_by_one = QuotaTree(admitted.cluster_queues, admitted.cohorts)
    workloads = [w for w in admitted.workloads.values() if w.admission is not None]
    rnd.shuffle(workloads)
    for w in workloads:
        assert w.admission is not None
        if w.admission.cluster_queue in one_by_one.cqs:
            one_by_one.add_usage(one_by_one.cqs[w.admission.cluster_queue], w.admission.total)
    summed = _Cycle(admitted, 2.0)
    summed._load_admitted()

    def usage(tree: QuotaTree) -> dict[str, dict[object, int]]:
        nodes = [*tree.cqs.values(), *tree.cohorts.values()]
        return {n.name: {fr: v for fr, v in n.usage.items() if v} for n in nodes}

    assert usage(summed.tree) == usage(one_by_one)


def test_add_then_remove_usage_is_exact_at_every_level() -> None:
    snap = snapshot(
        cohorts=[
            cohort("root"),
            cohort("mid").parent("root").quota("cpu", nominal="2", lending="1", borrowing="3"),
        ],
        cqs=[
            cq("a").cohort("mid").quota("cpu", nominal="4", lending="2"),
            cq("b").cohort("root").quota("cpu", nominal="4"),
        ],
    )
    tree = QuotaTree.from_snapshot(snap)
    node = tree.cqs[next(iter(tree.cqs))]
    fr = next(iter(node.nominal))
    for amount in (1000, 2500, 7000):
        before = [dict(n.usage) for n in (*tree.cqs.values(), *tree.cohorts.values())]
        tree.add_usage(node, {fr: amount})
        tree.remove_usage(node, {fr: amount})
        after = [dict(n.usage) for n in (*tree.cqs.values(), *tree.cohorts.values())]
        assert [{k: v for k, v in d.items() if v} for d in before] == [
            {k: v for k, v in d.items() if v} for d in after
        ]


@PROPS
@given(scenarios())
def test_every_workload_gets_exactly_one_decision_and_pending_ones_a_position(
    snap: Snapshot,
) -> None:
    result = schedule(snap, 1.0)
    admitted = {a.workload for a in result.admitted}
    assert admitted.isdisjoint(result.pending)
    assert admitted | set(result.pending) == set(snap.workloads)
    positioned = {w for order in result.queue_order.values() for w in order}
    assert positioned <= set(result.pending)
    for wid in result.pending:
        if snap.workloads[wid].active and snap.workloads[wid].local_queue in snap.local_queues:
            assert wid in positioned
