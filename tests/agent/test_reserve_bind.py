"""Reserve, then bind, on a real kubesim cluster: a reservation request holds quota and creates
nothing until the hub binds it; a reservation not bound in time is released; a Bind for
what the agent does not hold is answered Withdrawn (docs/exactly-once.md)."""

from __future__ import annotations

import asyncio

from agent.k8s.client import KubeClient, Resource
from agent.lease import LeaseTerms
from api.v1alpha1.messages import (
    Bind,
    DispatchOffer,
    Hello,
    Withdraw,
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


def reservation(
    name: str, *, timeout: int = 30, cpu: str = "500m", script: str = "true", priority: int = 0
) -> DispatchOffer:
    """A reservation request (an offer not bound yet)."""
    offer = offer_for(job_source(name, cpu=cpu, script=script), priority=priority or None)
    return offer.model_copy(update={"bound": False, "reservation_timeout_seconds": timeout})


async def jobs(kube: KubeClient) -> list[str]:
    listed = await kube.list(Resource.JOBS, namespace="team-a")
    return sorted(j["metadata"]["name"] for j in listed.items)


def reports(hub: FakeHub, name: str) -> list[WorkloadStatusReport]:
    return [r for r in hub.of_type(WorkloadStatusReport) if r.workload.endswith(f"/job-{name}")]


async def test_a_reservation_holds_its_quota_creates_no_job_and_a_bind_materialises_it(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(reservation("held", cpu="1500m", script="sleep 0.5"))
    reserved = await hub.wait_for(status(WorkloadPhase.RESERVED, "held"))
    assert reserved.admission is not None and reserved.admission.cluster_queue == "cq"
    assert reserved.admission.pod_set_assignments[0].flavors == {"cpu": "default"}
    # Its quota is taken: a bound offer that needs it waits.
    await hub.offer(offer_for(job_source("next", cpu="1", script="true")))
    await hub.wait_for(status(WorkloadPhase.PENDING, "next"))
    await asyncio.sleep(0.5)
    assert await jobs(kube) == []
    assert agent.admission.held["team-a/job-held"].phase is WorkloadPhase.RESERVED

    await hub.send(Bind(workload="team-a/job-held", generation=1))
    admitted = await hub.wait_for(status(WorkloadPhase.ADMITTED, "held"))
    assert admitted.admission == reserved.admission
    assert await jobs(kube) == ["held"]
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "held"), within=20)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "next"))


async def test_a_reservation_not_bound_in_time_is_released_and_its_quota_admits_the_next(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(reservation("unbound", timeout=1, cpu="1500m"))
    await hub.wait_for(status(WorkloadPhase.RESERVED, "unbound"))
    await hub.offer(offer_for(job_source("waiting", cpu="1", script="true")))
    await hub.wait_for(status(WorkloadPhase.PENDING, "waiting"))

    released = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "unbound"), within=5)
    assert released.pending_reason == "ReservationExpired"
    assert "team-a/job-unbound" not in agent.admission.held
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "waiting"))
    assert await jobs(kube) == ["waiting"]


async def test_a_bind_for_a_workload_not_held_is_answered_withdrawn(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.send(Bind(workload="team-a/job-stranger", generation=4))
    answer = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "stranger"))
    assert (answer.generation, answer.pending_reason) == (4, "NotHeld")

    # Held, but at an older generation than the one bound.
    await hub.offer(reservation("older"))
    await hub.wait_for(status(WorkloadPhase.RESERVED, "older"))
    await hub.send(Bind(workload="team-a/job-older", generation=2))
    newer = await hub.wait_for(
        lambda p: (
            status(WorkloadPhase.WITHDRAWN, "older")(p)
            and isinstance(p, WorkloadStatusReport)
            and p.generation == 2
        )
    )
    assert newer.pending_reason == "NotHeld"
    assert await jobs(kube) == []


async def test_a_bind_before_the_engine_admits_materialises_as_soon_as_it_does(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("hog", cpu="2", script="sleep 1")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "hog"))
    await hub.offer(reservation("early", cpu="1", script="true"))
    await hub.wait_for(status(WorkloadPhase.PENDING, "early"))
    await hub.send(Bind(workload="team-a/job-early", generation=1))

    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "early"), within=20)
    assert WorkloadPhase.RESERVED not in [r.phase for r in reports(hub, "early")]


async def test_a_redelivered_bind_repeats_the_latest_report_and_creates_nothing_more(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(reservation("twice", script="sleep 30"))
    await hub.wait_for(status(WorkloadPhase.RESERVED, "twice"))
    await hub.send(Bind(workload="team-a/job-twice", generation=1))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "twice"))
    before = len(reports(hub, "twice"))
    await hub.send(Bind(workload="team-a/job-twice", generation=1))
    await eventually(lambda: len(reports(hub, "twice")) > before)
    assert reports(hub, "twice")[-1].phase is WorkloadPhase.RUNNING
    assert await jobs(kube) == ["twice"]


async def test_a_withdrawn_reservation_is_released(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(reservation("lost-race", cpu="2"))
    await hub.wait_for(status(WorkloadPhase.RESERVED, "lost-race"))
    await hub.send(Withdraw(workload="team-a/job-lost-race", generation=1, reason="BoundElsewhere"))
    gone = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "lost-race"))
    assert gone.pending_reason == "BoundElsewhere"
    assert not agent.admission.held
    await hub.offer(offer_for(job_source("after", cpu="2", script="true")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "after"))


async def test_preemption_evicts_a_reservation_like_an_admitted_workload(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.config = config(preempt=True)
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(reservation("low", cpu="2", priority=1))
    await hub.wait_for(status(WorkloadPhase.RESERVED, "low"))
    await hub.offer(offer_for(job_source("high", cpu="2", script="true"), priority=100))
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "low"))
    assert evicted.pending_reason == "Preempted"
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "high"))
    assert await jobs(kube) == ["high"]


async def test_without_a_lease_nothing_is_reserved_or_created(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = None  # the hub does not answer renewals
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("bound", script="true")))
    await hub.offer(reservation("asked"))
    await asyncio.sleep(1.0)
    assert {r.phase for r in agent.admission.held.values()} == {WorkloadPhase.PENDING}
    assert not hub.of_type(WorkloadStatusReport)
    assert await jobs(kube) == []

    hub.lease = LeaseTerms()  # the next renewal is granted
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "bound"), within=20)
    await hub.wait_for(status(WorkloadPhase.RESERVED, "asked"))
