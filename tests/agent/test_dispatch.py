"""An offer's path through the agent on a real kubesim cluster: admitted, materialised with
the flavor injected, run, reported; rejected or kept pending when it must be."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agent import status as status_module
from agent import status_pass
from agent.k8s.client import KubeClient, Resource
from agent.records import Record
from api.quantity import Quantity
from api.v1alpha1.messages import (
    CapacityReport,
    Hello,
    OfferRejected,
    RejectReason,
    WorkloadPhase,
    WorkloadStatusReport,
)
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    config,
    eventually,
    job_source,
    offer_for,
    status,
)


async def test_an_offer_is_admitted_run_and_reported_until_it_succeeds(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hello.cluster == "sim-0" and hello.inventory.nodes == 2
    await hub.wait_for(lambda p: isinstance(p, CapacityReport))

    # Long enough to be seen running: Running waits out the status interval after Admitted.
    offer = offer_for(job_source("hello", pods=2, script="echo hello; sleep 1"))
    await hub.offer(offer)
    key = f"team-a/{offer.workload.metadata.name}"

    admitted = await hub.wait_for(status(WorkloadPhase.ADMITTED, offer.workload.metadata.name))
    assert admitted.workload == key and admitted.generation == 1
    assert admitted.admission.cluster_queue == "cq"
    assert admitted.admission.pod_set_assignments[0].flavors == {"cpu": "default"}

    job = await kube.get(Resource.JOBS, "team-a", "hello")
    labels = job["metadata"]["labels"]
    assert labels["multiq.dev/workload-uid"] == "uid-hello"
    assert labels["multiq.dev/dispatch-generation"] == "1"
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"type": "kubesim"}
    assert {"key": "multiq.dev/test", "operator": "Exists"} in pod_spec["tolerations"]

    await hub.wait_for(status(WorkloadPhase.RUNNING, offer.workload.metadata.name))
    done = await hub.wait_for(
        status(WorkloadPhase.SUCCEEDED, offer.workload.metadata.name), within=20
    )
    assert done.pods.succeeded == 2
    assert {(e.container, e.exit_code, e.reason) for e in done.exits} == {("main", 0, "Completed")}
    assert len(done.exits) == 2


async def test_an_offer_for_a_queue_this_cluster_lacks_is_rejected(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("lost", queue="nope"))
    await hub.offer(offer)
    rejected = await hub.wait_for(lambda p: isinstance(p, OfferRejected))
    assert rejected.reason is RejectReason.NO_SUCH_QUEUE
    assert rejected.generation == 1
    assert rejected.message


async def test_an_offer_that_must_wait_is_pending_with_a_reason_until_quota_frees(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    first = offer_for(job_source("first", cpu="1500m", script="sleep 0.8"))
    second = offer_for(job_source("second", cpu="1"))
    await hub.offer(first)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "first"))
    await hub.offer(second)
    pending = await hub.wait_for(status(WorkloadPhase.PENDING, "second"))
    assert pending.pending_reason == "WaitingForQuota"
    assert pending.pending_message
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "first"), within=20)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "second"))
    await eventually(lambda: kube.get(Resource.JOBS, "team-a", "second"))


async def test_an_offer_no_flavor_can_ever_hold_is_rejected_as_inadmissible(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("huge", cpu="5")))
    rejected = await hub.wait_for(lambda p: isinstance(p, OfferRejected))
    assert rejected.reason is RejectReason.INADMISSIBLE
    assert "exceeds" in rejected.message
    assert not agent.admission.held  # rejected: forgotten, not given back


async def test_a_failing_job_is_reported_failed_with_its_exit_code_and_reason(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    source = job_source("broken", script="echo oops; exit 3")
    source["spec"]["backoffLimit"] = 0
    await hub.offer(offer_for(source))
    failed = await hub.wait_for(status(WorkloadPhase.FAILED, "broken"), within=20)
    assert [(e.container, e.exit_code, e.reason) for e in failed.exits] == [("main", 3, "Error")]
    assert failed.conditions[0].type == "Finished"
    assert failed.conditions[0].reason == "Failed"


async def test_capacity_reports_nominal_usage_and_headroom_per_queue_flavor_and_resource(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    first = await hub.wait_for(lambda p: isinstance(p, CapacityReport))
    assert first.cluster == "sim-0" and first.nodes.total == 2 and first.nodes.ready == 2
    await hub.offer(offer_for(job_source("usage", cpu="500m", script="sleep 2")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "usage"))

    def used() -> CapacityReport | None:
        for report in reversed(hub.of_type(CapacityReport)):
            # (The report right after the first Hello precedes any config: no queues.)
            if report.queues and report.queues[0].usage == Quantity.parse("500m"):
                return report
        return None

    report = await eventually(used, within=5)
    [cell] = report.queues
    assert (cell.cluster_queue, cell.flavor, cell.resource) == ("cq", "default", "cpu")
    assert cell.nominal == Quantity.parse("2")
    assert cell.headroom == Quantity.parse("1500m")
    assert report.config_revision == 1
    assert report.nodes.free["cpu"] < report.nodes.allocatable["cpu"]


async def test_a_pending_offer_is_admitted_when_a_new_config_brings_more_quota(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("hog", cpu="2", script="sleep 30")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "hog"))
    await hub.offer(offer_for(job_source("patient", cpu="1", script="true")))
    await hub.wait_for(status(WorkloadPhase.PENDING, "patient"))
    await hub.send(config(revision=2, cpu="3"))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "patient"))


async def test_pod_events_alone_run_no_admission_cycle(agents: AgentRunner, hub: FakeHub) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("quiet-cycles", pods=2, script="sleep 1")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "quiet-cycles"))
    before = agent.admission.cycles
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "quiet-cycles"), within=20)
    # Pods started, became ready and succeeded in between: none of it can change admission.
    assert agent.admission.cycles - before <= 1


async def test_a_held_back_report_is_looked_at_again_when_due_not_on_every_pass(
    agents: AgentRunner, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Running waits out the status interval after Admitted. Passes in between (in a busy
    # cluster other workloads' events make them frequent) must not look at it every time.
    agent = await agents.start_with(status_interval=3.0)
    offer = offer_for(job_source("steady", script="sleep 30"))
    await hub.offer(offer)
    name = offer.workload.metadata.name
    await hub.wait_for(status(WorkloadPhase.ADMITTED, name))

    def running() -> bool:
        pods = agent.inventory.workload_pods("team-a", name)
        return any((p.get("status") or {}).get("phase") == "Running" for p in pods)

    await eventually(running)
    await agent.admission.observe()  # seen running: its report is held back now
    looks = 0
    real_observe = status_module.observe

    def counting_observe(**kwargs: Any) -> Any:
        nonlocal looks
        looks += 1
        return real_observe(**kwargs)

    monkeypatch.setattr(status_pass, "observe", counting_observe)
    for _ in range(20):
        await agent.admission.observe()
    assert looks <= 2  # (its pod may still turn ready meanwhile)
    report = await hub.wait_for(status(WorkloadPhase.RUNNING, name), within=10)
    assert report.pods.running == 1


async def test_a_job_that_starts_and_ends_within_the_status_interval_is_reported_twice_at_most(
    agents: AgentRunner, hub: FakeHub
) -> None:
    # Every report is a write at the hub: Admitted waits for the pods and goes with Running,
    # and the end follows; never Admitted, Running and the end apart.
    await agents.start_with(status_interval=5.0)
    await hub.offer(offer_for(job_source("brief", script="sleep 0.3")))
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "brief"), within=20)
    assert done.pods.succeeded == 1
    phases = [r.phase for r in hub.of_type(WorkloadStatusReport) if r.workload.endswith("brief")]
    assert WorkloadPhase.ADMITTED not in phases
    assert phases in ([WorkloadPhase.RUNNING, WorkloadPhase.SUCCEEDED], [WorkloadPhase.SUCCEEDED])
    assert done.admission is not None


async def test_while_admitted_waits_for_the_pods_capacity_reports_list_the_workload(
    agents: AgentRunner, hub: FakeHub
) -> None:
    # The hub books room for an offer until it is answered: a capacity report whose usage
    # counts the workload says so itself, so that room is not counted twice meanwhile.
    await agents.start_with(status_interval=3.0)
    await hub.wait_for(lambda p: isinstance(p, Hello))
    source = job_source("unplaced", cpu="500m", script="true")
    source["spec"]["template"]["spec"]["nodeSelector"] = {"multiq.dev/test": "nowhere"}
    await hub.offer(offer_for(source))

    def listing() -> CapacityReport | None:
        return next((r for r in hub.of_type(CapacityReport) if r.admitted), None)

    report = await eventually(listing, within=3)
    assert [(a.workload, a.generation, a.phase) for a in report.admitted] == [
        ("team-a/job-unplaced", 1, WorkloadPhase.ADMITTED)
    ]
    assert report.queues[0].usage == Quantity.parse("500m")
    assert not hub.of_type(WorkloadStatusReport)  # the pods never start: it waits
    admitted = await hub.wait_for(status(WorkloadPhase.ADMITTED, "unplaced"), within=10)
    assert admitted.admission is not None
    await hub.send(config(revision=2, cpu="3"))  # a change: a capacity report goes
    later = await eventually(
        lambda: next((r for r in hub.of_type(CapacityReport) if r.config_revision == 2), None)
    )
    assert later.admitted == []


async def test_a_look_again_time_that_came_and_the_look_it_brings_change_the_record_once(
    agents: AgentRunner, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A due look-again time is cleared and the look that follows changes the record too
    # (here: its Jobs seen): one record change — one write to the book, one snapshot
    # refresh — not one for the timer and one for the look.
    agent = await agents.start()
    offer = offer_for(job_source("timed", script="sleep 60"))
    await hub.offer(offer)
    name = offer.workload.metadata.name
    key = f"team-a/{name}"
    await hub.wait_for(status(WorkloadPhase.RUNNING, name))
    shell = agent.admission
    held = shell.held[key]
    assert held.jobs_seen
    shell._set(key, dataclasses.replace(held, jobs_seen=False, look_again_at=shell.clock() - 1))
    puts: list[Record | None] = []
    real_put = shell.book.put

    def counting_put(put_key: str, record: Record | None) -> Any:
        if put_key == key:
            puts.append(record)
        return real_put(put_key, record)

    monkeypatch.setattr(shell.book, "put", counting_put)
    await shell.observe()
    assert len(puts) == 1
    after = shell.held[key]
    assert after is puts[0]
    assert after.jobs_seen and after.look_again_at is None
    assert dataclasses.replace(after, jobs_seen=True) == dataclasses.replace(
        held, look_again_at=None
    )


async def test_jobs_made_and_the_look_at_them_change_the_record_once(
    agents: AgentRunner, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Jobs' names are saved by the status pass that next looks at them, in the record
    # change the look makes: never a change of their own that only asks for a look (a
    # look-again time already due), which cost a book write and a snapshot refresh more.
    agent = await agents.start()
    shell = agent.admission
    offer = offer_for(job_source("made", script="sleep 60"))
    key = f"team-a/{offer.workload.metadata.name}"
    puts: list[tuple[float, Record | None]] = []
    real_put = shell.book.put

    def noting_put(put_key: str, record: Record | None) -> Any:
        if put_key == key:
            puts.append((shell.clock(), record))
        return real_put(put_key, record)

    monkeypatch.setattr(shell.book, "put", noting_put)
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, offer.workload.metadata.name))
    with_jobs = [(at, r) for at, r in puts if r is not None and r.job_names]
    assert with_jobs, "the Jobs were never saved"
    first_at, first = with_jobs[0]
    assert first.look_again_at is None or first.look_again_at > first_at
    # and saved with them, as a restarted agent finds them (at the end of that pass, which
    # may send its report before it writes)

    def saved_names() -> tuple[str, ...] | None:
        saved = {r.key: r for r in shell.store.load_all(Record.from_json)}
        return saved[key].job_names if key in saved else None

    assert await eventually(saved_names) == first.job_names
