"""What a chaos run reports: the bench's JSON (counts, by mode, faults by kind, skipped ones
with the reason, the worst time to recover) and a failure message that names the invariant,
the workloads, the clusters, the times and the faults around them."""

from __future__ import annotations

from e2e.chaos.driver import ChaosConfig, ChaosReport
from e2e.chaos.faults import FaultKind, FaultRecord
from e2e.chaos.invariants import ClusterHistory, HubWorkload, PodRun, check

ORIGIN = 1000.0


def run(cluster: str, workload: str, start: float, stop: float, generation: int = 1) -> PodRun:
    return PodRun(
        cluster,
        "default",
        f"{workload}-{cluster}",
        {
            "multiq.dev/workload-name": workload,
            "multiq.dev/dispatch-generation": str(generation),
        },
        ORIGIN + start - 0.5,
        ORIGIN + start,
        ORIGIN + stop,
        "Succeeded",
    )


def report() -> ChaosReport:
    histories = [
        ClusterHistory("sim-0", [run("sim-0", "job-a", 10, 30), run("sim-0", "job-b", 5, 8)]),
        ClusterHistory("sim-1", [run("sim-1", "job-a", 22, 40, generation=2)]),
    ]
    hub = {
        "default/job-a": HubWorkload("default/job-a", ("Succeeded",), "sim-1", 2),
        "default/job-b": HubWorkload("default/job-b", ("Succeeded",), "sim-0", 1),
        "default/job-c": HubWorkload("default/job-c", (), "sim-0", 1),
    }
    accepted = ["default/job-a", "default/job-b", "default/job-c", "default/job-d"]
    verdict = check(histories, hub, accepted, ended_at=ORIGIN + 60, origin=ORIGIN)
    faults = [
        FaultRecord(FaultKind.LINK_CUT, "sim-0", ORIGIN + 9, ORIGIN + 24, "witness ran", 3.5),
        FaultRecord(FaultKind.HUB_KILL, None, ORIGIN + 30, ORIGIN + 31, "", 1.25),
        FaultRecord(FaultKind.HUB_KILL, None, ORIGIN + 40, ORIGIN + 41, "", None),
    ]
    return ChaosReport(
        config=ChaosConfig(workloads=4),
        verdict=verdict,
        faults=faults,
        skipped={"etcd-sigkill": "no HA here"},
        modes={
            "default/job-a": "BestFit",
            "default/job-b": "AllAtOnce",
            "default/job-c": "AllAtOnce",
            "default/job-d": "Incremental",
        },
        not_accepted={},
        not_injected=[],
        crashes=["agent-sim-2 (exit 1) at 12.0s"],
        origin=ORIGIN,
        wall_seconds=75.04,
    )


def test_the_json_counts_workloads_by_mode_and_faults_by_kind_with_the_worst_recovery() -> None:
    out = report().to_json()
    assert out["ok"] is False
    assert out["hubs"] == "2 hubs on etcd"
    assert out["workloads"] == {
        "submitted": 4,
        "accepted": 4,
        "finished": 2,
        "lost": 1,
        "overlapping": 1,
        "overlapping_same_generation": 0,
        "not_exactly_one_terminal_state": 0,
        "stuck": 1,
        "completed_more_than_once": 1,
        "not_accepted": 0,
    }
    assert out["by_mode"]["BestFit"] == {
        "accepted": 1,
        "overlapping": 1,
        "overlapping_same_generation": 0,
        "stuck": 0,
        "lost": 0,
    }
    assert out["by_mode"]["AllAtOnce"]["stuck"] == 1
    assert out["by_mode"]["Incremental"]["lost"] == 1
    assert out["faults"] == {"link-cut": 1, "hub-sigkill": 2}
    assert out["skipped_faults"] == {"etcd-sigkill": "no HA here"}
    assert out["recovery"] == {
        "worst_seconds": 3.5,
        "worst_fault": {
            "kind": "link-cut",
            "target": "sim-0",
            "at": 9.0,
            "seconds": 15.0,
            "recoveredAfter": 3.5,
            "detail": "witness ran",
        },
        "unrecovered": 1,
        "worst_seconds_by_kind": {"hub-sigkill": 1.25, "link-cut": 3.5},
    }
    assert out["crashes"] == ["agent-sim-2 (exit 1) at 12.0s"]
    assert out["wall_seconds"] == 75.0
    assert out["violations"][0] == "1 workload(s) ran in two clusters at once (overlapping):"


def test_the_failure_message_names_invariants_workloads_clusters_times_and_faults() -> None:
    message = report().failure_message()
    assert message.splitlines()[0] == "hubs: 2 hubs on etcd"
    assert message.splitlines()[1].startswith(
        "workloads: submitted 4, accepted 4, finished 2, lost 1, overlapping 1"
    )
    assert "BestFit: accepted 1, overlapping 1" in message
    assert (
        "  - default/job-a: pod default/job-a-sim-0 in sim-0 (generation 1) from 10.00s to "
        "30.00s and pod default/job-a-sim-1 in sim-1 (generation 2) from 22.00s to 40.00s "
        "ran together for 8.00s"
    ) in message
    assert "accepted by the hub, then lost:\n  - default/job-d" in message
    assert "default/job-c: not finished at the end, bound to sim-0 (generation 1)" in message
    assert "processes that exited on their own: agent-sim-2 (exit 1) at 12.0s" in message
    assert "  - link-cut sim-0 at 9.0s for 15.0s (witness ran)" in message
    assert "  - hub-sigkill hub at 30.0s for 1.0s" in message


def test_a_run_that_kept_every_promise_is_ok_with_no_violations() -> None:
    histories = [ClusterHistory("sim-0", [run("sim-0", "job-a", 10, 30)])]
    hub = {"default/job-a": HubWorkload("default/job-a", ("Succeeded",), "sim-0", 1)}
    verdict = check(histories, hub, ["default/job-a"], ended_at=ORIGIN + 60, origin=ORIGIN)
    clean = ChaosReport(
        config=ChaosConfig(workloads=1),
        verdict=verdict,
        faults=[],
        skipped={},
        modes={"default/job-a": "BestFit"},
        not_accepted={},
        not_injected=[],
        crashes=[],
        origin=ORIGIN,
        wall_seconds=1.0,
    )
    assert clean.ok
    assert clean.to_json()["violations"] == []
    assert clean.to_json()["recovery"]["worst_seconds"] is None
    not_taken = ChaosReport(**{**clean.__dict__, "not_accepted": {"c0001": "422: bad"}})
    assert not not_taken.ok
    assert "1 submission(s) never accepted" in not_taken.failure_message()
    fault_missed = ChaosReport(
        **{**clean.__dict__, "not_injected": ["leader-sigkill at 9.0s: no single hub led"]}
    )
    assert not fault_missed.ok
    assert fault_missed.to_json()["not_injected"] == ["leader-sigkill at 9.0s: no single hub led"]
    assert "faults not injected: leader-sigkill at 9.0s" in fault_missed.failure_message()
