"""Preemption-based fair sharing (kueue.md §3.1, §3.2): dominant resource shares with
weights, the fair-sharing order across cluster queues, and the preemption strategies —
Kueue's two and MultiQ's `MultiQTowardFairShare`."""

from __future__ import annotations

import pytest

from agent.engine.apply import apply_result
from agent.engine.fair_sharing import fair_level, tournament_key, weighted_share_milli
from agent.engine.quota import QuotaTree
from agent.engine.result import PreemptionReason
from agent.engine.snapshot import (
    ClusterQueueName,
    CohortName,
    EngineConfig,
    FairSharing,
    FairSharingStrategy,
)
from tests.builders import (
    CQBuilder,
    WorkloadBuilder,
    admitted_ids,
    cohort,
    cq,
    ids,
    preempted_ids,
    run,
    snapshot,
    wl,
)

FAIR = EngineConfig(fair_sharing=FairSharing())
FINAL_ONLY = EngineConfig(
    fair_sharing=FairSharing((FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))
)
INITIAL_ONLY = EngineConfig(
    fair_sharing=FairSharing((FairSharingStrategy.LESS_THAN_INITIAL_SHARE,))
)
TOWARD = EngineConfig(fair_sharing=FairSharing((FairSharingStrategy.TOWARD_FAIR_SHARE,)))
INF = 2**63 - 1


def shared(weight_a: float = 1.0, weight_b: float = 1.0) -> list[CQBuilder]:
    """a and b own nothing; an idle lender owns the cohort's 10 CPUs."""
    return [
        cq("a").cohort("c").quota("cpu", nominal="0").preemption(reclaim="Any").weight(weight_a),
        cq("b").cohort("c").quota("cpu", nominal="0").preemption(reclaim="Any").weight(weight_b),
        cq("lender").cohort("c").quota("cpu", nominal="10"),
    ]


def running(queue: str, n: int, cpu: str = "1", prefix: str = "") -> list[WorkloadBuilder]:
    return [
        wl(f"{prefix or queue}-{i}").request("cpu", cpu).admitted(queue, at=float(i))
        for i in range(n)
    ]


# --------------------------------------------------------------------------------------------
# dominant resource share

SHARES = [
    pytest.param(shared(), running("a", 4), "a", 400, id="borrowed over what the cohort lends"),
    pytest.param(shared(weight_a=2), running("a", 4), "a", 200, id="a weight divides the share"),
    pytest.param(shared(weight_a=0), running("a", 1), "a", INF, id="weight 0 borrowing: infinite"),
    pytest.param(shared(weight_a=0), [], "a", 0, id="weight 0 not borrowing: zero"),
    pytest.param(
        [
            cq("a").cohort("c").quota("cpu", nominal="4"),
            cq("b").cohort("c").quota("cpu", nominal="6"),
        ],
        running("a", 4),
        "a",
        0,
        id="usage within nominal quota is no share",
    ),
    pytest.param(
        [cq("a").quota("cpu", nominal="4")], running("a", 4), "a", 0, id="no cohort: no share"
    ),
    pytest.param(
        [
            cq("a").cohort("c").quota("cpu", nominal="0").quota("memory", nominal="0"),
            cq("lender").cohort("c").quota("cpu", nominal="10").quota("memory", nominal="100"),
        ],
        [wl("w").request("cpu", "2").request("memory", "50").admitted("a")],
        "a",
        500,
        id="the dominant resource decides",
    ),
]


@pytest.mark.parametrize(("cqs", "admitted", "queue", "share"), SHARES)
def test_weighted_share(
    cqs: list[CQBuilder], admitted: list[WorkloadBuilder], queue: str, share: int
) -> None:
    tree = QuotaTree.from_snapshot(snapshot(cqs=cqs, workloads=admitted))
    assert weighted_share_milli(tree.cqs[ClusterQueueName(queue)]) == share


def test_a_cohort_has_a_share_of_its_parent_and_its_weight_divides_it() -> None:
    cqs = [
        cq("a").cohort("left").quota("cpu", nominal="0"),
        cq("b").cohort("right").quota("cpu", nominal="10"),
    ]
    cohorts = [cohort("left").parent("root").weight(2), cohort("right").parent("root")]
    tree = QuotaTree.from_snapshot(snapshot(cqs=cqs, cohorts=cohorts, workloads=running("a", 5)))
    # left borrows 5 of the 10 root could lend: DRS 500, weight 2.
    assert weighted_share_milli(tree.cohorts[CohortName("left")]) == 250
    assert weighted_share_milli(tree.cohorts[CohortName("right")]) == 0


def test_the_tournament_compares_queues_at_their_lowest_common_cohort() -> None:
    # x1 has the lowest share of all, but its cohort `left` borrows more than `right`:
    # every queue of `right` goes before it.
    cqs = [
        cq("x1").cohort("left").quota("cpu", nominal="0"),
        cq("x2").cohort("left").quota("cpu", nominal="0"),
        cq("y1").cohort("right").quota("cpu", nominal="5"),
        cq("y2").cohort("right").quota("cpu", nominal="5"),
    ]
    cohorts = [cohort("left").parent("root"), cohort("right").parent("root")]
    workloads = [*running("x1", 1), *running("x2", 5), *running("y1", 8), *running("y2", 0)]
    tree = QuotaTree.from_snapshot(snapshot(cqs=cqs, cohorts=cohorts, workloads=workloads))
    order = sorted(tree.cqs, key=lambda n: tournament_key(tree.cqs[n]))
    assert order == ["y2", "y1", "x1", "x2"]


# --------------------------------------------------------------------------------------------
# order across cluster queues


@pytest.mark.parametrize(
    ("config", "first"),
    [
        pytest.param(EngineConfig(), "a-new", id="classic: the higher priority goes first"),
        pytest.param(FAIR, "b-new", id="fair sharing: the lower share goes first"),
    ],
)
def test_the_queue_with_the_lower_share_admits_first(config: EngineConfig, first: str) -> None:
    workloads = [
        *running("a", 4),
        *running("b", 2),
        wl("a-new").queue("a").request("cpu", "4").priority(100),
        wl("b-new").queue("b").request("cpu", "4"),
    ]
    result = run(snapshot(cqs=shared(), workloads=workloads, config=config))
    assert admitted_ids(result) == ids(first)


# --------------------------------------------------------------------------------------------
# preemption strategies: a and b borrow everything from the lender, a submits one more


STRATEGIES = [
    pytest.param(
        EngineConfig(),
        shared(),
        [*running("b", 10)],
        "1",
        [],
        id="classic: a borrowing preemptor without borrowWithinCohort takes nothing",
    ),
    pytest.param(
        FAIR,
        shared(),
        [*running("b", 10)],
        "1",
        ["b-9"],
        id="fair: the queue holding everything gives back to the empty one",
    ),
    pytest.param(
        FAIR,
        shared(),
        [*running("a", 5), *running("b", 5)],
        "1",
        [],
        id="fair: no preemption once shares are equal",
    ),
    pytest.param(
        FAIR,
        shared(weight_a=2),
        [*running("a", 5), *running("b", 5)],
        "1",
        ["b-4"],
        id="fair: a heavier weight may take more than an equal part",
    ),
    pytest.param(
        FAIR,
        shared(weight_a=0),
        [*running("b", 10)],
        "1",
        [],
        id="fair: a queue of weight 0 never preempts by share",
    ),
    pytest.param(
        FINAL_ONLY,
        shared(),
        [*running("a", 4), *running("b", 3, cpu="2")],
        "1",
        [],
        id="LessThanOrEqualToFinalShare: refused when the victim's queue would end below",
    ),
    pytest.param(
        INITIAL_ONLY,
        shared(),
        [*running("a", 4), *running("b", 3, cpu="2")],
        "1",
        ["b-2"],
        id="LessThanInitialShare: allowed while below the victim queue's share before",
    ),
    pytest.param(
        FAIR,
        shared(),
        [*running("a", 4), *running("b", 3, cpu="2")],
        "1",
        ["b-2"],
        id="strategies in order: the second applies where the first refuses",
    ),
]


@pytest.mark.parametrize(("config", "cqs", "admitted", "cpu", "victims"), STRATEGIES)
def test_preemption_across_queues_follows_the_strategies(
    config: EngineConfig,
    cqs: list[CQBuilder],
    admitted: list[WorkloadBuilder],
    cpu: str,
    victims: list[str],
) -> None:
    incoming = wl("new").queue("a").request("cpu", cpu).created(50)
    result = run(snapshot(cqs=cqs, workloads=[*admitted, incoming], config=config))
    assert preempted_ids(result) == ids(*victims)


# Hierarchical cohorts: root owns 10 CPUs; cohorts left (x1, x2) and right (y1) own nothing.
# x2 and y1 hold 5 each; x1 submits 1 CPU.
@pytest.mark.parametrize("config", [FAIR, TOWARD], ids=["Kueue's", "toward fair share"])
@pytest.mark.parametrize(
    ("left_weight", "victims"),
    [
        pytest.param(
            1.0,
            ["x2-4"],
            id="the sides below the common cohort are compared: left would pass right, so "
            "x1 takes from its sibling x2 instead",
        ),
        pytest.param(
            2.0,
            ["y1-4"],
            id="with left weighted 2 its side stays below right's: y1 gives back",
        ),
    ],
)
def test_hierarchical_preemption_compares_the_sides_below_the_common_cohort(
    left_weight: float, victims: list[str], config: EngineConfig
) -> None:
    # Under MultiQTowardFairShare the fair level is the common cohort's: at root left may hold
    # 5 of the 10 CPUs at weight 1 (it has them: no taking from right), 6.7 at weight 2;
    # within left, x1 may hold 2.5 next to x2.
    cqs = [
        cq(name).cohort(parent).quota("cpu", nominal="0").preemption(reclaim="Any")
        for name, parent in (("x1", "left"), ("x2", "left"), ("y1", "right"))
    ]
    cohorts = [
        cohort("root").quota("cpu", nominal="10"),
        cohort("left").parent("root").weight(left_weight),
        cohort("right").parent("root"),
    ]
    incoming = wl("new").queue("x1").request("cpu", "1").created(50)
    workloads = [*running("x2", 5), *running("y1", 5), incoming]
    result = run(snapshot(cqs=cqs, cohorts=cohorts, workloads=workloads, config=config))
    assert preempted_ids(result) == ids(*victims)


def test_a_victim_taken_by_share_is_preempted_for_fair_sharing_and_says_so() -> None:
    # Kueue's reason for every victim of another queue under fair sharing, even where the
    # classic rules would have called it reclamation.
    workloads = [*running("a", 10), wl("new").queue("b").request("cpu", "1").created(50)]
    result = run(snapshot(cqs=shared(), workloads=workloads, config=FAIR))
    assert [(p.victim, p.reason) for p in result.preempted] == [
        ("default/a-9", PreemptionReason.IN_COHORT_FAIR_SHARING)
    ]
    assert "(InCohortFairSharing)" in result.preempted[0].message


# --------------------------------------------------------------------------------------------
# MultiQTowardFairShare: no preemption moves a share away from its target, whoever else waits


def pool(cpus: int = 8, **weights: float) -> list[CQBuilder]:
    """Queues owning nothing, weighted as given; an idle lender owns the cohort's CPUs."""
    return [
        *(
            cq(name).cohort("c").quota("cpu", nominal="0").preemption(reclaim="Any").weight(w)
            for name, w in weights.items()
        ),
        cq("lender").cohort("c").quota("cpu", nominal=str(cpus)),
    ]


def preempted_for(result: object, preemptor: str) -> list[str]:
    assert hasattr(result, "preempted")
    return sorted(p.victim for p in result.preempted if p.preemptor == ids(preemptor)[0])


@pytest.mark.parametrize(
    ("waiting", "level"),
    [
        pytest.param(["big", "small", "mid"], 1 / 6, id="everyone waits: 8 CPUs over weight 6"),
        pytest.param(["small", "mid"], 1 / 6, id="a queue above the level is cut to it"),
        pytest.param(
            ["big"], 6 / 8, id="queues below the level waiting for nothing keep their part"
        ),
    ],
)
def test_the_fair_level_shares_the_cohorts_borrowing_by_weight_among_those_waiting(
    waiting: list[str], level: float
) -> None:
    # big (weight 1) holds 6, small (1) holds 2, mid (4) holds nothing: 8 of 8 lent.
    snap = snapshot(
        cqs=pool(big=1, small=1, mid=4), workloads=[*running("big", 6), *running("small", 2)]
    )
    tree = QuotaTree.from_snapshot(snap)
    root = tree.cohorts[CohortName("c")]
    assert fair_level(root, {id(tree.cqs[ClusterQueueName(q)]) for q in waiting}) == (
        pytest.approx(level)
    )


def test_weight_0_holds_nothing_at_the_fair_level_and_its_borrowing_is_shared() -> None:
    snap = snapshot(cqs=pool(a=1, zero=0), workloads=running("zero", 2))
    tree = QuotaTree.from_snapshot(snap)
    waiting = {id(tree.cqs[ClusterQueueName("a")]), id(tree.cqs[ClusterQueueName("zero")])}
    assert fair_level(tree.cohorts[CohortName("c")], waiting) == pytest.approx(2 / 8)


TOWARD_CASES = [
    pytest.param(
        FAIR,
        pool(big=1, small=1, mid=4),
        [*running("big", 7), *running("small", 1)],
        ["big-6"],
        id="Kueue's pair rule: small takes a 2nd CPU while mid (weight 4) waits below it",
    ),
    pytest.param(
        TOWARD,
        pool(big=1, small=1, mid=4),
        [*running("big", 7), *running("small", 1)],
        [],
        id="toward fair share: small is at its level (8/6 of weight 1) while mid waits: no",
    ),
    pytest.param(
        TOWARD,
        pool(big=1, small=1, mid=4),
        running("big", 8),
        ["big-7"],
        id="toward fair share: below its level, small takes from the queue above it",
    ),
    pytest.param(
        FAIR,
        pool(big=1, small=1, mid=4),
        running("big", 8),
        ["big-7"],
        id="Kueue's strategies agree when the move is toward both targets",
    ),
    pytest.param(
        TOWARD,
        pool(small=1, zero=0),
        running("zero", 8),
        ["zero-7"],
        id="toward fair share: a queue of weight 0 gives back all it borrows",
    ),
    pytest.param(
        TOWARD,
        pool(small=0, big=1),
        running("big", 8),
        [],
        id="toward fair share: a queue of weight 0 never preempts to borrow",
    ),
]


@pytest.mark.parametrize(("config", "cqs", "admitted", "victims"), TOWARD_CASES)
def test_toward_fair_share_never_moves_a_share_past_its_target(
    config: EngineConfig, cqs: list[CQBuilder], admitted: list[WorkloadBuilder], victims: list[str]
) -> None:
    # mid, when there, waits with a workload larger than the cohort: it preempts nothing.
    incoming = [
        wl("new").queue("small").request("cpu", "1").created(50),
        wl("mid-new").queue("mid").request("cpu", "9").created(50),
    ]
    result = run(snapshot(cqs=cqs, workloads=[*admitted, *incoming], config=config))
    assert preempted_for(result, "new") == ids(*victims)


@pytest.mark.parametrize(
    ("config", "victims"),
    [
        pytest.param(FAIR, ["low-1"], id="Kueue's pair rule takes from low, below its share"),
        pytest.param(TOWARD, [], id="toward fair share leaves low at its fair level"),
    ],
)
def test_a_victims_queue_is_never_pushed_below_the_fair_level(
    config: EngineConfig, victims: list[str]
) -> None:
    # high holds 6 CPUs it may not lose (priority above the preemptor's, reclaim
    # LowerPriority); low holds 2 (level 8/3 each): only low's workloads are candidates.
    cqs = [
        cq(name).cohort("c").quota("cpu", nominal="0").preemption(reclaim="LowerPriority")
        for name in ("new-q", "high", "low")
    ]
    cqs.append(cq("lender").cohort("c").quota("cpu", nominal="8"))
    admitted = [
        *(w.priority(100) for w in running("high", 6)),
        *(w.priority(-1) for w in running("low", 2)),
        wl("high-more").queue("high").request("cpu", "1").priority(100).created(50),
        wl("low-more").queue("low").request("cpu", "1").priority(-1).created(50),
    ]
    incoming = wl("new").queue("new-q").request("cpu", "1").created(50)
    result = run(snapshot(cqs=cqs, workloads=[*admitted, incoming], config=config))
    assert preempted_for(result, "new") == ids(*victims)


def _weighted_pool_over_cycles(config: EngineConfig) -> tuple[int, dict[str, int]]:
    """The benchmark's setting, smaller: weights 4:2:1:1 over 56 CPUs, 1-CPU jobs; `w4`
    fills the cohort, then the others submit more than they can run; six cycles. Returns
    the preemptions that moved a queue past its target (28, 14, 7, 7 CPUs) — the victim's
    queue held no more than its target, or the preemptor's queue (counting what it admitted
    and reserved in the cycle) already held its — and what each queue holds at the end."""
    weights = {"w4": 4, "w2": 2, "w1a": 1, "w1b": 1}
    target = {q: 56 * w // 8 for q, w in weights.items()}
    waiting = [
        wl(f"{q}-q{i}").queue(q).request("cpu", "1").created(10.0 + i)
        for q in weights
        for i in range(28 if q == "w4" else 30)
    ]
    snap = snapshot(
        cqs=pool(56, **weights), workloads=[*running("w4", 56), *waiting], config=config
    )
    away = 0
    for now in range(100, 106):
        result = run(snap, float(now))
        held = dict.fromkeys(weights, 0)
        for w in snap.workloads.values():
            if w.admission is not None and w.admission.cluster_queue in held:
                held[w.admission.cluster_queue] += 1
        for a in result.admitted:  # the preemptors of the last cycle, on their freed room
            held[snap.workloads[a.workload].queue_name] += 1
        for p in result.preempted:
            preemptor_q = snap.workloads[p.preemptor].queue_name
            victim_q = p.victim_cluster_queue
            away += held[victim_q] <= target[victim_q] or held[preemptor_q] >= target[preemptor_q]
            held[victim_q] -= 1
            held[preemptor_q] += 1
        snap = apply_result(snap, result)
    end = dict.fromkeys(weights, 0)
    for w in snap.workloads.values():
        if w.admission is not None and w.admission.cluster_queue in end:
            end[w.admission.cluster_queue] += 1
    return away, end


FAIR_END = {"w4": 28, "w2": 14, "w1a": 7, "w1b": 7}


def test_over_cycles_toward_fair_share_reaches_the_weighted_shares_without_a_step_back() -> None:
    assert _weighted_pool_over_cycles(TOWARD) == (0, FAIR_END)


def test_over_cycles_kueues_pairwise_strategies_overshoot_on_the_way() -> None:
    away, held = _weighted_pool_over_cycles(FAIR)
    assert held == FAIR_END
    assert away > 0, "Kueue's strategies no longer overshoot here: the case shows nothing"
