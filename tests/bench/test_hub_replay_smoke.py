"""The hub replay benchmark at a tiny scale: its own checks of the promise hold (nothing
runs in two clusters at once, nothing runs unbound, nothing is lost or stuck), a cluster loss
plays out by the fencing rules, the fleet quota and the parking hold work back, and its JSON
has the figures. Its checks are not vacuous: agents that do not fence make them find work
running in two clusters at once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.hub_replay import LOSS_TIMEOUT_SECONDS, Replay, main

WORKLOADS = 150


def tiny(workloads: int, seed: int, *, agents_fence: bool = True) -> dict[str, Any]:
    """A fiftieth of the full world's room and rate: the same shape in time, 150 workloads
    over ~8 simulated minutes in about a second of wall time."""
    replay = Replay(
        workloads=workloads, clusters=10, seed=seed, scale=0.02, agents_fence=agents_fence
    )
    return replay.run().report()


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    # Seed 4: the first lost cluster holds a reservation request when it goes, and offers time
    # out in both modes (another seed may need another look at the loss tests).
    return tiny(WORKLOADS, seed=4)


def test_every_workload_finishes_and_no_invariant_is_broken(report: dict[str, Any]) -> None:
    assert report["violations"] == {}, report["violation_examples"]
    assert report["invariant_violations"] == 0
    assert report["finished"] == report["workloads"] == WORKLOADS


def test_the_json_has_the_figures_of_the_cycle_and_of_the_wait(report: dict[str, Any]) -> None:
    assert report["cycles"] > 0 and report["simulated_seconds"] > report["arrival_span_seconds"]
    assert 0 < report["dispatch_wall_seconds"] <= report["wall_seconds"]
    wall = report["cycle_wall_ms"]
    assert 0 < wall["p50"] <= wall["p99"] <= wall["max"]
    assert report["dispatch_ms_per_workload"] > 0
    assert report["placements_per_cycle"]["max"] >= report["placements_per_cycle"]["mean"] > 0
    waited = report["time_to_dispatch_s"]
    assert 0 <= waited["p50"] <= waited["p99"] <= waited["max"]
    assert report["time_to_admission_s"]["p50"] >= waited["p50"]


def test_best_fit_binds_and_the_other_modes_ask_for_reservations(
    report: dict[str, Any],
) -> None:
    assert report["offers"]["bound"] > 0 and report["offers"]["reservation"] > 0
    # Reservations that lost the race are refused and told to withdraw.
    assert report["refused_reports"].get("bound_to", 0) > 0


def test_work_that_fits_nowhere_and_work_over_the_fleet_quota_is_parked(
    report: dict[str, Any],
) -> None:
    assert report["parked_peak"] >= report["parked_over_fleet_quota_peak"] > 0
    assert report["parked_peak"] > report["parked_over_fleet_quota_peak"]


def test_a_lost_clusters_bound_work_goes_elsewhere_only_once_the_fencing_rules_allow(
    report: dict[str, Any],
) -> None:
    long_loss, _ = report["cluster_losses"]
    assert long_loss["back_after_s"] > LOSS_TIMEOUT_SECONDS
    assert long_loss["bound_let_go"] > 0 and report["let_go"] == long_loss["bound_let_go"]
    assert long_loss["bound_let_go_after_s"] >= long_loss["let_go_allowed_after_s"]
    assert long_loss["let_go_ran_elsewhere"] == long_loss["bound_let_go"]


def test_a_lost_clusters_reservation_requests_end_at_once(report: dict[str, Any]) -> None:
    long_loss, _ = report["cluster_losses"]
    assert long_loss["reservations_at_loss"] > 0, "this seed no longer loses a reservation"
    assert long_loss["reservations_outliving_the_loss"] == 0
    # Within the cycle's next look at expiries and losses (a tenth of the offer timeout).
    assert 0 < long_loss["reservations_ended_within_s"] <= 1.1


def test_offers_a_slow_agent_leaves_unanswered_time_out(report: dict[str, Any]) -> None:
    assert report["offer_timeouts"].get("bound", 0) > 0
    assert report["offer_timeouts"].get("reservation", 0) > 0


def test_a_cluster_back_before_the_loss_timeout_keeps_its_work_and_runs_it_again(
    report: dict[str, Any],
) -> None:
    _, short_loss = report["cluster_losses"]
    assert short_loss["back_after_s"] < LOSS_TIMEOUT_SECONDS
    assert short_loss["bound_let_go"] == 0
    assert short_loss["runs_fenced_by_agent"] > 0
    assert short_loss["offers_resent_on_return"] >= short_loss["runs_fenced_by_agent"]


def test_agents_that_do_not_fence_are_caught_running_work_in_two_clusters_at_once() -> None:
    # Seed 3: some of the lost cluster's work outlasts the loss timeout there.
    report = tiny(WORKLOADS, seed=3, agents_fence=False)
    assert report["violations"].get("two_running_copies", 0) > 0
    assert report["violations"].get("unbound_while_running", 0) > 0


def test_the_command_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workloads", "60", "--clusters", "3", "--scale", "0.02"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["benchmark"] == "hub_replay" and printed["workloads"] == 60
    assert printed["invariant_violations"] == 0
