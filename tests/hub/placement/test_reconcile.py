"""What a reconnecting agent is told (docs/exactly-once.md, "Reconnect"): the hub cancels what
it no longer knows, withdraws what it gave elsewhere, binds again a reservation it bound,
hears again what the agent did while they were apart — a generation given back included —
and sends again the offers the agent does not hold."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.v1alpha1.messages import HeldWorkload, WorkloadPhase
from api.v1alpha1.workload import Workload
from hub import transitions
from hub.placement.reconcile import deactivation_withdrawals, reconcile
from tests.builders import api_workload

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
P = WorkloadPhase


def bound(name: str, cluster: str = "east", generation: int = 1, admitted: bool = True) -> Workload:
    wl = transitions.mark_bound_offer(api_workload(name), cluster, generation, NOW)
    if admitted:
        transitions.set_condition(wl, transitions.ADMITTED, True, "Admitted", "", NOW)
    return wl


def held(name: str, phase: WorkloadPhase, generation: int = 1) -> HeldWorkload:
    return HeldWorkload(workload=f"team/{name}", generation=generation, phase=phase)


@pytest.mark.parametrize(
    ("item", "hub_view", "told"),
    [
        (held("gone", P.RUNNING), None, "cancel"),
        (held("elsewhere", P.RUNNING), bound("elsewhere", "west"), "withdraw"),
        (held("older", P.RUNNING, 1), bound("older", "west", 2), "withdraw"),
        (held("done-elsewhere", P.SUCCEEDED), bound("done-elsewhere", "west"), None),
        (held("reserved", P.RESERVED), bound("reserved", admitted=False), "bind"),
        (held("ran", P.RUNNING), bound("ran", admitted=False), "catch_up"),
        (held("running", P.RUNNING), bound("running"), None),
        (held("finished", P.SUCCEEDED), bound("finished"), "catch_up"),
        (held("fenced", P.EVICTED), bound("fenced"), "catch_up"),
        (held("released", P.WITHDRAWN), bound("released", admitted=False), "catch_up"),
    ],
    ids=lambda v: v.workload if isinstance(v, HeldWorkload) else None,
)
def test_what_a_held_workload_is_told(
    item: HeldWorkload, hub_view: Workload | None, told: str | None
) -> None:
    workloads = {} if hub_view is None else {item.workload: hub_view}
    plan = reconcile("east", [item], workloads, [item.workload] if hub_view else [])
    kinds = {
        "cancel": plan.cancel,
        "withdraw": plan.withdraw,
        "bind": plan.bind,
        "catch_up": plan.catch_up,
        "deactivated": plan.deactivated,
    }
    assert {k for k, items in kinds.items() if items} == ({told} if told else set())
    assert plan.resend == []


def test_what_the_hub_gave_the_cluster_and_it_does_not_hold_is_offered_again() -> None:
    offered = transitions.mark_offered(api_workload("asked"), ["east", "west"], 1, NOW)
    workloads = {"team/kept": bound("kept"), "team/asked": offered}
    plan = reconcile("east", [], workloads, ["team/kept", "team/asked"])
    assert plan.resend == [("team/asked", False), ("team/kept", True)]


@pytest.mark.parametrize("phase", [P.RUNNING, P.EVICTED, P.WITHDRAWN])
def test_a_workload_bound_here_again_and_held_at_an_older_generation_is_offered_again(
    phase: WorkloadPhase,
) -> None:
    # The cluster was fenced (or lost its session) and the hub bound a new generation to it
    # while it still held the old one: the old is withdrawn if live, the new one offered.
    item = held("again", phase, 1)
    plan = reconcile("east", [item], {item.workload: bound("again", "east", 2)}, [item.workload])
    assert plan.resend == [(item.workload, True)]
    assert plan.withdraw == ([item] if phase is P.RUNNING else [])
    assert plan.cancel == plan.bind == plan.catch_up == []


# --- a workload a user stopped (spec.active: false) ------------------------------------------


def stopped(wl: Workload) -> Workload:
    wl = wl.model_copy(deep=True)
    wl.spec.active = False
    return wl


@pytest.mark.parametrize(
    ("item", "told"),
    [
        (held("stopped-running", P.RUNNING), "deactivated"),
        (held("stopped-admitted", P.ADMITTED), "deactivated"),
        (held("stopped-reserved", P.RESERVED), "deactivated"),
        # Given back already and the hub missed the report: heard now, which unbinds it.
        (held("stopped-given-back", P.WITHDRAWN), "catch_up"),
    ],
    ids=lambda v: v.workload if isinstance(v, HeldWorkload) else None,
)
def test_a_stopped_workload_held_where_it_is_bound_is_withdrawn_not_kept(
    item: HeldWorkload, told: str
) -> None:
    name = item.workload.split("/")[1]
    plan = reconcile("east", [item], {item.workload: stopped(bound(name))}, [item.workload])
    kinds = {"withdraw": plan.withdraw, "deactivated": plan.deactivated, "bind": plan.bind}
    kinds["catch_up"] = plan.catch_up
    assert {k for k, items in kinds.items() if items} == {told}
    assert plan.resend == []


def test_a_stopped_workload_bound_here_and_not_held_is_not_offered_again() -> None:
    key = "team/stopped"
    plan = reconcile("east", [], {key: stopped(bound("stopped"))}, [key])
    assert plan.resend == []


class TestDeactivationWithdrawals:
    def test_stopping_a_bound_workload_withdraws_it_from_its_cluster(self) -> None:
        running = bound("job", "east", generation=3)
        assert deactivation_withdrawals(running, stopped(running)) == [("east", 3)]

    def test_stopping_an_offered_workload_withdraws_every_nominee(self) -> None:
        offered = transitions.mark_offered(api_workload("job"), ["east", "west"], 2, NOW)
        assert deactivation_withdrawals(offered, stopped(offered)) == [("east", 2), ("west", 2)]

    def test_a_pending_workload_stopped_has_nothing_to_withdraw(self) -> None:
        pending = api_workload("job")
        assert deactivation_withdrawals(pending, stopped(pending)) == []

    def test_later_changes_of_a_stopped_workload_do_not_repeat_the_withdraw(self) -> None:
        first = stopped(bound("job", "east"))
        again = first.model_copy(deep=True)
        transitions.set_condition(again, "PodsReady", True, "PodsReady", "", NOW)
        assert deactivation_withdrawals(first, again) == []

    def test_a_nominee_bound_after_the_stop_is_told_too(self) -> None:
        offered = stopped(transitions.mark_offered(api_workload("job"), ["east", "west"], 2, NOW))
        nominee_bound = offered.model_copy(deep=True)
        assert nominee_bound.status is not None
        nominee_bound.status.cluster_name = "north"
        assert deactivation_withdrawals(offered, nominee_bound) == [("north", 2)]

    def test_an_active_or_finished_workload_is_never_withdrawn_for_it(self) -> None:
        running = bound("job")
        assert deactivation_withdrawals(None, running) == []
        finished = stopped(running)
        transitions.set_condition(finished, transitions.FINISHED, True, "Succeeded", "", NOW)
        assert deactivation_withdrawals(running, finished) == []
