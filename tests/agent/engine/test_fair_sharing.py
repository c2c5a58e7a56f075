"""Preemption-based fair sharing (kueue.md §3.1, §3.2): dominant resource shares with
weights, the fair-sharing order across cluster queues, and the preemption strategies."""

from __future__ import annotations

import pytest

from agent.engine.fair_sharing import tournament_key, weighted_share_milli
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
    left_weight: float, victims: list[str]
) -> None:
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
    result = run(snapshot(cqs=cqs, cohorts=cohorts, workloads=workloads, config=FAIR))
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
