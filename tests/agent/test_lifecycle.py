"""What the hub can ask of a held workload — withdraw, cancel, re-offer — and what the
engine can decide about it — preemption — with generations fencing stale messages; and the
end of a workload: how soon its quota is used again, how long it stays held."""

from __future__ import annotations

import time

from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.messages import (
    Cancel,
    Hello,
    OfferRejected,
    RejectReason,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from kubesim.testing import RunningSimulator
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    config,
    eventually,
    given_back,
    holds_running,
    job_source,
    offer_for,
    status,
)


async def job_names(kube: KubeClient) -> list[str]:
    listed = await kube.list(Resource.JOBS, namespace="team-a")
    return sorted(
        j["metadata"]["name"] for j in listed.items if not j["metadata"].get("deletionTimestamp")
    )


async def test_a_withdrawal_the_api_keeps_refusing_is_reported_only_once_its_jobs_are_gone(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient, sim: RunningSimulator
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("stubborn", script="sleep 30"))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "stubborn"))
    # More failures in a row than the client retries: the stop fails, the agent carries on.
    sim.clusters[0].faults.fail_next(12, 500)
    await hub.send(Withdraw(workload=key, generation=1, reason="Rebalance"))
    gone = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "stubborn"), within=30)
    assert gone.generation == 1
    # The hub heard it only once the Jobs were gone: it may run the workload elsewhere now.
    assert "stubborn" not in await job_names(kube)
    assert given_back(agent, key)


async def test_a_withdrawn_workload_is_stopped_and_reported_withdrawn(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("going", script="sleep 30"))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "going"))
    await hub.send(Withdraw(workload=key, generation=1, reason="Rebalance"))
    gone = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "going"))
    assert gone.generation == 1 and gone.conditions[0].reason == "Rebalance"
    assert (gone.pending_reason, gone.pending_message) == ("Rebalance", "Withdraw by the hub")
    await eventually(lambda: _no_jobs(kube))
    assert given_back(agent, key) and not holds_running(agent)


async def _no_jobs(kube: KubeClient) -> bool:
    return await job_names(kube) == []


async def test_a_cancelled_workload_loses_its_jobs_and_its_quota(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    big = offer_for(job_source("big", cpu="2", script="sleep 30"))
    waiting = offer_for(job_source("waiting", cpu="1", script="true"))
    await hub.offer(big)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "big"))
    await hub.offer(waiting)
    await hub.wait_for(status(WorkloadPhase.PENDING, "waiting"))
    await hub.send(
        Cancel(workload=f"team-a/{big.workload.metadata.name}", generation=1, reason="UserDelete")
    )
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "big"))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "waiting"))
    await eventually(lambda: _only(kube, "waiting"))


async def _only(kube: KubeClient, name: str) -> bool:
    return await job_names(kube) == [name]


async def test_messages_about_an_older_generation_are_ignored_and_older_offers_rejected(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("fenced", script="sleep 30"), generation=3)
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "fenced"))

    await hub.send(Withdraw(workload=key, generation=2, reason="Stale"))
    await hub.offer(offer_for(job_source("fenced"), generation=2))
    rejected = await hub.wait_for(lambda p: isinstance(p, OfferRejected))
    assert rejected.reason is RejectReason.STALE_GENERATION and rejected.generation == 2
    # A redelivered offer of the held generation only repeats the latest report.
    before = len(hub.of_type(WorkloadStatusReport))
    await hub.offer(offer)
    await eventually(lambda: len(hub.of_type(WorkloadStatusReport)) > before)
    assert hub.of_type(WorkloadStatusReport)[-1].phase is WorkloadPhase.RUNNING
    assert not [p for p in hub.of_type(WorkloadStatusReport) if p.phase is WorkloadPhase.WITHDRAWN]
    assert await job_names(kube) == ["fenced"]
    job = await kube.get(Resource.JOBS, "team-a", "fenced")
    assert job["metadata"]["labels"]["multiq.dev/dispatch-generation"] == "3"


async def test_a_newer_generation_replaces_the_jobs_of_the_older_one(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("again", script="sleep 30"), generation=1))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "again"))
    await hub.offer(offer_for(job_source("again", script="sleep 30"), generation=2))
    admitted = await hub.wait_for(
        lambda p: (
            status(WorkloadPhase.ADMITTED, "again")(p)
            and isinstance(p, WorkloadStatusReport)
            and p.generation == 2
        ),
        within=15,
    )
    assert admitted.generation == 2

    async def generation_two() -> bool:
        try:
            job = await kube.get(Resource.JOBS, "team-a", "again")
        except Exception:
            return False
        return bool(job["metadata"]["labels"]["multiq.dev/dispatch-generation"] == "2")

    await eventually(generation_two, within=15)


async def test_a_higher_priority_offer_preempts_and_the_victim_is_reported_evicted(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.config = config(preempt=True)
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    low = offer_for(job_source("low", cpu="2", script="sleep 30"), priority=1)
    high = offer_for(job_source("high", cpu="2", script="true"), priority=100)
    await hub.offer(low)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "low"))
    await hub.offer(high)
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "low"))
    assert evicted.conditions[0].reason == "Preempted"
    assert evicted.pending_reason == "Preempted"
    assert evicted.pending_message == evicted.conditions[0].message != ""
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "high"))
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "high"), within=20)
    assert "low" not in await job_names(kube)


async def test_a_protected_workload_is_preempted_when_its_protection_ends_with_no_other_event(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    cfg = config(preempt=True)
    cfg.cluster_queues[0].spec.preemption.min_admit_seconds = 3
    hub.config = cfg
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    low = offer_for(job_source("low", cpu="2", script="sleep 30"), priority=1)
    await hub.offer(low)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "low"))
    admitted = time.monotonic()
    high = offer_for(job_source("high", cpu="2", script="true"), priority=100)
    await hub.offer(high)
    waiting = await hub.wait_for(
        lambda p: (
            isinstance(p, WorkloadStatusReport)
            and p.workload.endswith("high")
            and p.pending_reason == "PreemptionProtected"
        )
    )
    assert "is protected by minAdmitSeconds" in waiting.pending_message
    # Nothing happens in the cluster meanwhile: only the engine's wakeup can run the cycle.
    await hub.wait_for(status(WorkloadPhase.EVICTED, "low"), within=10)
    assert time.monotonic() - admitted >= 2.5
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "high"))


async def test_a_workload_whose_jobs_someone_deletes_is_reported_failed_and_frees_its_quota(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("doomed", cpu="2", script="sleep 30"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "doomed"))
    await kube.delete(Resource.JOBS, "team-a", "doomed")
    failed = await hub.wait_for(status(WorkloadPhase.FAILED, "doomed"))
    assert "deleted outside MultiQ" in failed.conditions[0].message
    assert "deleted outside MultiQ" in failed.pending_message
    await hub.offer(offer_for(job_source("next", cpu="2", script="true")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "next"))
    assert agent.admission.held[f"team-a/{offer.workload.metadata.name}"].finished


async def test_a_finished_workload_is_forgotten_once_its_ttl_has_passed_and_not_before(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start_with(finished_ttl=1.5)
    await hub.offer(offer_for(job_source("first", script="true")))
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "first"))
    await hub.offer(offer_for(job_source("second", script="sleep 1")))
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "second"))
    held = agent.admission.held
    assert "team-a/job-second" in held
    # No other event is due: the agent wakes for the expiry itself, oldest first.
    await eventually(lambda: "team-a/job-first" not in held, within=5)
    assert "team-a/job-second" in held
    await eventually(lambda: "team-a/job-second" not in held, within=5)
    assert not agent.admission.held  # (one record per workload: nothing else to clear)


async def test_quota_released_by_a_finished_workload_is_used_in_the_same_pass_that_sees_it(
    agents: AgentRunner, hub: FakeHub
) -> None:
    # A long pause between passes: if the finish were seen after the cycle, the waiting
    # workload would be admitted one pause later.
    agent = await agents.start_with(cycle_min_interval=1.5)
    await hub.offer(offer_for(job_source("big", cpu="2", script="sleep 4")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "big"))
    await hub.offer(offer_for(job_source("waiting", cpu="1", script="true")))
    await hub.wait_for(status(WorkloadPhase.PENDING, "waiting"))
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "big"))
    finished_at = next(c for c in done.conditions if c.type == "Finished").last_transition_time
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "waiting"), within=15)
    waiting = agent.admission.held["team-a/job-waiting"].workload.status
    assert waiting is not None and finished_at is not None
    reserved = next(c for c in waiting.conditions if c.type == "QuotaReserved")
    assert (reserved.last_transition_time - finished_at).total_seconds() < 0.5
