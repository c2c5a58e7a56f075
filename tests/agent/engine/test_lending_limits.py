"""Lending limits: how much of its unused nominal quota a queue or cohort lends out."""

from __future__ import annotations

import pytest

from tests.builders import CQBuilder, WorkloadBuilder, admitted_ids, cq, ids, run, snapshot, wl


def team_a(lending: str | None = "1") -> CQBuilder:
    return cq("team-a-cq").cohort("team-ab").quota("cpu", nominal="9", lending=lending)


def team_b() -> CQBuilder:
    return cq("team-b-cq").cohort("team-ab").quota("cpu", nominal="12")


# Kueue docs "LendingLimit": team-a-cq nominal 9 with lendingLimit 1, team-b-cq nominal 12.
CASES = [
    pytest.param(
        [team_a(), team_b()],
        [wl("b").queue("team-b-cq").request("cpu", "13")],
        ["b"],
        id="team-b can borrow the one CPU team-a lends: 12+1",
    ),
    pytest.param(
        [team_a(), team_b()],
        [wl("b").queue("team-b-cq").request("cpu", "14")],
        [],
        id="team-b cannot borrow past team-a's lending limit",
    ),
    pytest.param(
        [team_a(), team_b()],
        [
            wl("b-run").request("cpu", "13").admitted("team-b-cq"),
            wl("a").queue("team-a-cq").request("cpu", "8"),
        ],
        ["a"],
        id="team-a keeps 9-1=8 CPUs for itself while team-b borrows",
    ),
    pytest.param(
        [team_a(), team_b()],
        [
            wl("b-run").request("cpu", "13").admitted("team-b-cq"),
            wl("a").queue("team-a-cq").request("cpu", "9"),
        ],
        [],
        id="the CPU team-a lent is gone while team-b uses it",
    ),
    pytest.param(
        [team_a(lending="0"), team_b()],
        [wl("b").queue("team-b-cq").request("cpu", "13")],
        [],
        id="a lending limit of zero lends nothing",
    ),
    pytest.param(
        [team_a(), team_b()],
        [wl("a").queue("team-a-cq").request("cpu", "21")],
        ["a"],
        id="a lending limit does not limit the lender's own borrowing",
    ),
]


@pytest.mark.parametrize(("cqs", "workloads", "expected"), CASES)
def test_lending_limit_scenarios(
    cqs: list[CQBuilder], workloads: list[WorkloadBuilder], expected: list[str]
) -> None:
    assert admitted_ids(run(snapshot(cqs=cqs, workloads=workloads))) == ids(*expected)
