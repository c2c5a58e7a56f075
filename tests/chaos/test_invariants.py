"""The chaos checker on synthetic histories: it finds every kind of broken promise, names the
workload, the clusters and the times, and stays quiet on runs that kept them."""

from __future__ import annotations

from collections.abc import Iterable

from e2e.chaos.invariants import (
    ClusterHistory,
    HubWorkload,
    Observation,
    PodRun,
    Verdict,
    check,
)

END = 1000.0


def pod(
    cluster: str,
    workload: str,
    *,
    ran: tuple[float, float | None] | None,
    generation: int = 1,
    outcome: str | None = "Succeeded",
    name: str | None = None,
) -> PodRun:
    """A pod of `workload` (in namespace default) that ran from `ran[0]` to `ran[1]` (None:
    still running at the end; `ran=None`: never ran)."""
    started, stopped = ran if ran is not None else (None, None)
    return PodRun(
        cluster=cluster,
        namespace="default",
        name=name or f"{workload}-{cluster}-g{generation}",
        labels={
            "multiq.dev/workload-namespace": "default",
            "multiq.dev/workload-name": workload,
            "multiq.dev/dispatch-generation": str(generation),
        },
        created_at=(started or 0.0) - 1.0,
        started_at=started,
        stopped_at=stopped,
        outcome=outcome if stopped is not None or ran is None else None,
    )


def histories(*runs: PodRun, dropped: Iterable[str] = ()) -> list[ClusterHistory]:
    clusters = sorted({r.cluster for r in runs} | {"sim-0", "sim-1", "sim-2"})
    return [
        ClusterHistory(c, [r for r in runs if r.cluster == c], dropped=1 if c in dropped else 0)
        for c in clusters
    ]


def done(name: str, reason: str = "Succeeded", cluster: str = "sim-0") -> HubWorkload:
    return HubWorkload(f"default/{name}", (reason,), cluster, 1)


def hub(*workloads: HubWorkload) -> dict[str, HubWorkload]:
    return {w.key: w for w in workloads}


def judge(
    runs: list[ClusterHistory],
    view: dict[str, HubWorkload],
    accepted: Iterable[str],
    observed: dict[str, list[Observation]] | None = None,
) -> Verdict:
    return check(
        runs,
        view,
        [f"default/{name}" for name in accepted],
        ended_at=END,
        observed=observed,
        origin=100.0,
    )


# --- a run that kept every promise ----------------------------------------------------------


def test_a_run_where_each_workload_ran_once_and_finished_passes() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 120)),
            pod("sim-0", "a", ran=(110, 121), name="a-second-pod"),
            pod("sim-1", "b", ran=(115, 130)),
        ),
        hub(done("a"), done("b", cluster="sim-1")),
        ["a", "b"],
    )
    assert verdict.ok, verdict.explain()
    assert verdict.explain() == "every invariant holds"
    assert verdict.counts() == {
        "accepted": 2,
        "finished": 2,
        "lost": 0,
        "overlapping": 0,
        "overlapping_same_generation": 0,
        "not_exactly_one_terminal_state": 0,
        "stuck": 0,
        "completed_more_than_once": 0,
    }


def test_a_workload_evicted_from_one_cluster_and_run_later_in_another_is_not_an_overlap() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 120), outcome="Failed"),
            pod("sim-1", "a", ran=(120, 140), generation=2),
        ),
        hub(done("a", cluster="sim-1")),
        ["a"],
    )
    assert verdict.ok, verdict.explain()


def test_pods_that_never_ran_and_pods_of_other_objects_are_ignored() -> None:
    stranger = PodRun("sim-1", "default", "web", {"app": "web"}, 100.0, 100.0, None)
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 140)),
            pod("sim-1", "a", ran=None, outcome="Deleted"),
            stranger,
        ),
        hub(done("a")),
        ["a"],
    )
    assert verdict.ok, verdict.explain()


# --- overlapping ----------------------------------------------------------------------------


def test_one_generation_running_in_two_clusters_at_once_is_counted_both_ways() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 130)),
            pod("sim-2", "a", ran=(112, 125), outcome="Failed"),
        ),
        hub(done("a")),
        ["a"],
    )
    assert not verdict.ok
    [overlap] = verdict.overlapping
    assert verdict.overlapping_generations == (overlap,)
    assert (overlap.first.cluster, overlap.second.cluster) == ("sim-0", "sim-2")
    assert overlap.seconds == 13.0
    assert verdict.counts()["overlapping"] == 1
    assert verdict.counts()["overlapping_same_generation"] == 1
    assert verdict.explain().splitlines() == [
        "1 workload(s) ran in two clusters at once (overlapping):",
        "  - default/a: pod default/a-sim-0-g1 in sim-0 (generation 1) from 10.00s to 30.00s and "
        "pod default/a-sim-2-g1 in sim-2 (generation 1) from 12.00s to 25.00s ran together "
        "for 13.00s",
        "1 workload(s) one generation ran in two clusters at once (overlapping, same generation):",
        "  - default/a: pod default/a-sim-0-g1 in sim-0 (generation 1) from 10.00s to 30.00s and "
        "pod default/a-sim-2-g1 in sim-2 (generation 1) from 12.00s to 25.00s ran together "
        "for 13.00s",
    ]


def test_an_old_generation_still_running_beside_the_new_one_is_an_overlap_of_the_workload() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, None), generation=1),
            pod("sim-1", "a", ran=(200, 260), generation=2),
        ),
        hub(done("a", cluster="sim-1")),
        ["a"],
    )
    [overlap] = verdict.overlapping
    assert verdict.overlapping_generations == ()
    assert overlap.seconds == 60.0
    assert "from 10.00s to the end" in overlap.describe(100.0)


def test_the_longest_overlap_of_a_workload_is_reported_once() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 130), name="p0"),
            pod("sim-1", "a", ran=(129, 131), name="p1"),
            pod("sim-2", "a", ran=(105, 125), name="p2"),
        ),
        hub(done("a")),
        ["a"],
    )
    [overlap] = verdict.overlapping
    assert (overlap.first.name, overlap.second.name, overlap.seconds) == ("p2", "p0", 15.0)


def test_overlapping_workloads_are_listed_longest_overlap_first() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 120)),
            pod("sim-1", "a", ran=(119, 130)),
            pod("sim-0", "b", ran=(110, 150)),
            pod("sim-2", "b", ran=(120, 160), generation=2),
        ),
        hub(done("a"), done("b")),
        ["a", "b"],
    )
    assert [(o.workload, o.seconds) for o in verdict.overlapping] == [
        ("default/b", 30.0),
        ("default/a", 1.0),
    ]


def test_a_copy_killed_right_after_it_started_is_an_overlap_told_in_milliseconds() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 120)),
            pod("sim-1", "a", ran=(110.5, 110.504), outcome="Failed"),
        ),
        hub(done("a")),
        ["a"],
    )
    [overlap] = verdict.overlapping
    assert overlap.describe(100.0).endswith("ran together for 0.004s")


def test_pods_that_touch_end_to_start_do_not_overlap() -> None:
    verdict = judge(
        histories(pod("sim-0", "a", ran=(110, 120)), pod("sim-1", "a", ran=(120, 130))),
        hub(done("a")),
        ["a"],
    )
    assert verdict.overlapping == ()


# --- lost and stuck -------------------------------------------------------------------------


def test_an_accepted_workload_missing_from_the_hub_is_lost() -> None:
    verdict = judge(histories(), hub(done("a")), ["a", "b"])
    assert verdict.lost == ("default/b",)
    assert verdict.counts()["lost"] == 1
    assert "1 workload(s) accepted by the hub, then lost:\n  - default/b" in verdict.explain()


def test_an_accepted_workload_not_finished_at_the_end_is_stuck_and_says_where_it_is() -> None:
    bound = HubWorkload("default/a", (), "sim-2", 4)
    pending = HubWorkload("default/b")
    verdict = judge(histories(), hub(bound, pending), ["a", "b"])
    assert [s.workload for s in verdict.stuck] == ["default/a", "default/b"]
    assert verdict.finished == 0
    text = verdict.explain()
    assert "default/a: not finished at the end, bound to sim-2 (generation 4)" in text
    assert "default/b: not finished at the end, not bound to any cluster" in text


def test_examples_are_cut_at_the_limit_with_a_count_of_the_rest() -> None:
    view = hub(*(HubWorkload(f"default/w{i}") for i in range(15)))
    text = judge(histories(), view, [f"w{i}" for i in range(15)]).explain(limit=3)
    assert text.splitlines()[0] == "15 workload(s) accepted and not finished by the end (stuck):"
    assert text.splitlines()[-1] == "  … and 12 more"
    assert len(text.splitlines()) == 5


# --- exactly one terminal state -------------------------------------------------------------


def test_a_terminal_state_that_changes_after_it_was_reached_is_a_violation() -> None:
    observed = {
        "default/a": [
            Observation(100.0, None),
            Observation(120.0, "Succeeded"),
            Observation(150.0, None),
            Observation(170.0, "Failed"),
        ]
    }
    verdict = judge(
        histories(pod("sim-0", "a", ran=(110, 119))), hub(done("a", "Failed")), ["a"], observed
    )
    [violation] = verdict.terminal
    assert violation.detail == (
        "its terminal state changed: Succeeded at 20.0s, then not finished at 50.0s, "
        "then Failed at 70.0s"
    )


def test_a_terminal_state_seen_again_and_again_is_one_state() -> None:
    observed = {
        "default/a": [
            Observation(100.0, None),
            Observation(120.0, "Succeeded"),
            Observation(130.0, "Succeeded"),
        ]
    }
    verdict = judge(histories(pod("sim-0", "a", ran=(110, 119))), hub(done("a")), ["a"], observed)
    assert verdict.ok, verdict.explain()


def test_two_finished_conditions_at_the_hub_are_a_violation() -> None:
    twice = HubWorkload("default/a", ("Succeeded", "Failed"), "sim-0", 1)
    verdict = judge(histories(pod("sim-0", "a", ran=(110, 119))), hub(twice), ["a"])
    [violation] = verdict.terminal
    assert violation.detail == "the hub shows 2 Finished conditions: Succeeded, Failed"


def test_succeeded_at_the_hub_without_a_succeeded_pod_anywhere_is_a_violation() -> None:
    verdict = judge(
        histories(pod("sim-1", "a", ran=(110, 119), outcome="Failed")),
        hub(done("a", cluster="sim-2")),
        ["a"],
    )
    [violation] = verdict.terminal
    assert violation.detail == (
        "the hub says Succeeded (on sim-2, generation 1) but no pod of it succeeded in any cluster"
    )


def test_completing_in_two_runs_one_after_the_other_is_counted_but_allowed() -> None:
    verdict = judge(
        histories(
            pod("sim-0", "a", ran=(110, 120)),
            pod("sim-1", "a", ran=(130, 140), generation=2),
        ),
        hub(done("a", cluster="sim-1")),
        ["a"],
    )
    assert verdict.ok, verdict.explain()
    assert verdict.completed_more_than_once == ("default/a",)


# --- what the checker cannot see ------------------------------------------------------------


def test_a_history_that_dropped_runs_fails_the_verdict() -> None:
    verdict = judge(
        histories(pod("sim-0", "a", ran=(110, 120)), dropped=["sim-1"]), hub(done("a")), ["a"]
    )
    assert not verdict.ok
    assert verdict.incomplete_histories == ("sim-1",)
    assert "pod history incomplete (runs dropped) in: sim-1" in verdict.explain()


# --- reading the wire -----------------------------------------------------------------------


def test_histories_and_workloads_are_read_from_their_wire_forms() -> None:
    history = ClusterHistory.from_wire(
        {
            "cluster": "sim-0",
            "dropped": 0,
            "pods": [
                {
                    "cluster": "sim-0",
                    "namespace": "team",
                    "name": "a-0",
                    "uid": "u",
                    "labels": {
                        "multiq.dev/workload-namespace": "team",
                        "multiq.dev/workload-name": "a",
                        "multiq.dev/dispatch-generation": "3",
                    },
                    "node": "n1",
                    "createdAt": 1.0,
                    "startedAt": 2.0,
                    "stoppedAt": None,
                    "outcome": None,
                    "reason": None,
                }
            ],
        }
    )
    [run] = history.runs
    assert (run.workload, run.generation, run.interval(9.0)) == ("team/a", 3, (2.0, 9.0))
    wl = HubWorkload.from_wire(
        {
            "metadata": {"name": "a", "namespace": "team"},
            "status": {
                "clusterName": "sim-0",
                "dispatchGeneration": 3,
                "conditions": [
                    {"type": "Admitted", "status": "True", "reason": "Admitted"},
                    {"type": "Finished", "status": "True", "reason": "Succeeded"},
                ],
            },
        }
    )
    assert wl == HubWorkload("team/a", ("Succeeded",), "sim-0", 3)
    pending = HubWorkload.from_wire({"metadata": {"name": "b", "namespace": "team"}})
    assert not pending.finished
