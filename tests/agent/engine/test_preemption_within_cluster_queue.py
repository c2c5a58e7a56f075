"""withinClusterQueue preemption: LowerPriority, LowerOrNewerEqualPriority, Never."""

from __future__ import annotations

import pytest

from agent.engine.result import PendingCode, PreemptionReason
from tests.builders import (
    CQBuilder,
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


def queue(policy: str) -> CQBuilder:
    return cq("q").quota("cpu", nominal="6").preemption(within=policy)


def running(
    name: str, cpu: str, prio: int, at: float = 0.0, created: float = 0.0
) -> WorkloadBuilder:
    return wl(name).request("cpu", cpu).priority(prio).created(created).admitted("q", at=at)


CASES = [
    pytest.param(
        "LowerPriority",
        [running("low", "2", -1), running("mid", "2", 0), running("high", "2", 1)],
        wl("new").queue("q").request("cpu", "2").priority(1).created(5),
        ["low"],
        id="LowerPriority evicts the lowest-priority workload that makes room",
    ),
    pytest.param(
        "LowerPriority",
        [running("low", "2", -1), running("mid", "2", 0), running("high", "2", 1)],
        wl("new").queue("q").request("cpu", "4").priority(1).created(5),
        ["low", "mid"],
        id="LowerPriority evicts several lower workloads when one is not enough",
    ),
    pytest.param(
        "LowerPriority",
        [running("a", "3", 0), running("b", "3", 0)],
        wl("new").queue("q").request("cpu", "3").priority(0).created(5),
        [],
        id="LowerPriority never evicts an equal priority",
    ),
    pytest.param(
        "LowerOrNewerEqualPriority",
        [running("older", "3", 0, created=1), running("newer", "3", 0, created=9)],
        wl("new").queue("q").request("cpu", "3").priority(0).created(5),
        ["newer"],
        id="LowerOrNewerEqualPriority evicts an equal priority created later",
    ),
    pytest.param(
        "LowerOrNewerEqualPriority",
        [running("older", "3", 0, created=1), running("oldest", "3", 0, created=0)],
        wl("new").queue("q").request("cpu", "3").priority(0).created(5),
        [],
        id="LowerOrNewerEqualPriority spares equal priorities created earlier",
    ),
    pytest.param(
        "Never",
        [running("low", "6", -5)],
        wl("new").queue("q").request("cpu", "2").priority(10),
        [],
        id="Never preempts nothing",
    ),
    pytest.param(
        "LowerPriority",
        [running("old", "2", 0, at=1), running("recent", "2", 0, at=9), running("x", "2", 5)],
        wl("new").queue("q").request("cpu", "2").priority(3).created(10),
        ["recent"],
        id="among equal priorities the most recently admitted goes first",
    ),
    pytest.param(
        "LowerPriority",
        [running("tiny", "1", -2), running("big", "3", -1), running("keep", "2", 9)],
        wl("new").queue("q").request("cpu", "3").priority(1).created(10),
        ["big"],
        id="minimisation drops a victim that is not needed once a bigger one is chosen",
    ),
    pytest.param(
        "LowerPriority",
        [running("low", "1", -1), running("high", "5", 9)],
        wl("new").queue("q").request("cpu", "3").priority(1).created(10),
        [],
        id="no preemption when the candidates cannot free enough",
    ),
]


@pytest.mark.parametrize(("policy", "admitted", "incoming", "victims"), CASES)
def test_within_cluster_queue(
    policy: str, admitted: list[WorkloadBuilder], incoming: WorkloadBuilder, victims: list[str]
) -> None:
    result = run(snapshot(cqs=[queue(policy)], workloads=[*admitted, incoming]))
    assert preempted_ids(result) == ids(*victims)
    assert admitted_ids(result) == []
    reason = reason_of(result, "new")
    if victims:
        assert reason.code is PendingCode.WAITING_FOR_PREEMPTED_WORKLOADS
        assert {p.reason for p in result.preempted} == {PreemptionReason.IN_CLUSTER_QUEUE}
        assert result.new_preemptors == {"default/new"}
    else:
        assert reason.code in {PendingCode.NO_PREEMPTION_CANDIDATES, PendingCode.WAITING_FOR_QUOTA}
