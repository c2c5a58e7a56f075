"""Fencing on a real kubesim cluster: an agent whose lease runs out stops its work; every Job
carries a deadline that follows the lease, so a frozen agent's Jobs stop without it; a user's
own deadline is kept; with fencing off nothing of it happens (docs/exactly-once.md)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent.deadlines import USER_DEADLINE_ANNOTATION
from agent.k8s.client import KubeClient, Resource
from agent.lease import LeaseTerms
from api.v1alpha1.messages import Hello, LeaseRenew, Withdraw, WorkloadPhase
from kubesim.testing import RunningSimulator
from tests.agent.conftest import (
    CLUSTER,
    TOKEN,
    AgentRunner,
    FakeHub,
    eventually,
    job_source,
    offer_for,
    status,
)

SHORT = LeaseTerms(lease_seconds=4, grace_seconds=2)


async def job_or_none(kube: KubeClient, name: str) -> dict[str, Any] | None:
    listed = await kube.list(Resource.JOBS, namespace="team-a")
    return next(
        (
            j
            for j in listed.items
            if j["metadata"]["name"] == name and not j["metadata"].get("deletionTimestamp")
        ),
        None,
    )


def deadline_of(job: dict[str, Any]) -> float:
    """When the Job controller fails the Job: its start plus activeDeadlineSeconds."""
    started = datetime.fromisoformat(job["status"]["startTime"]).timestamp()
    return started + float(job["spec"]["activeDeadlineSeconds"])


def failed_by_deadline(job: dict[str, Any] | None) -> dict[str, Any] | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == "Failed" and cond["status"] == "True":
            assert cond["reason"] == "DeadlineExceeded"
            return dict(cond)
    return None


async def test_an_agent_whose_lease_runs_out_deletes_its_jobs_and_reports_them_evicted(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = SHORT
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("stopped", script="sleep 30")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "stopped"))

    hub.lease = None  # the hub stops answering; the session stays up
    lost = time.monotonic()
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "stopped"), within=10)
    assert time.monotonic() - lost <= SHORT.lease_seconds + 1
    assert evicted.pending_reason == "ClusterLost"
    assert "lease" in evicted.pending_message
    assert await job_or_none(kube, "stopped") is None
    assert not agent.admission.held

    # No lease, no work: a new offer waits until the hub grants one again.
    await hub.offer(offer_for(job_source("later", script="true")))
    await asyncio.sleep(1.0)
    assert await job_or_none(kube, "later") is None
    hub.lease = SHORT
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "later"), within=20)


async def test_an_agent_cut_off_from_the_hub_fences_and_says_so_when_it_reconnects(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = SHORT
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("cut-off", script="sleep 30")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "cut-off"))

    hub.refuse = True
    await hub.drop()
    await eventually(lambda: not agent.admission.held, within=10)
    assert await job_or_none(kube, "cut-off") is None

    hub.envelopes.clear()
    hub.refuse = False
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hello.workloads == []
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "cut-off"))
    assert evicted.conditions[0].reason == "ClusterLost"


async def test_a_jobs_deadline_follows_the_lease_while_it_is_renewed_and_not_after(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = SHORT
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("kept", script="sleep 60")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "kept"))
    job = await job_or_none(kube, "kept")
    assert job is not None
    first = deadline_of(job)
    # At creation: no later than the lease deadline plus half the grace.
    assert first - time.time() <= SHORT.lease_seconds + SHORT.grace_seconds / 2 + 1

    # Renewed: the deadline moves forward, and the Job outlives its first deadline.
    await eventually(lambda: _deadline_later_than(kube, "kept", first), within=10)
    await asyncio.sleep(max(0.0, first - time.time()) + 1.0)
    job = await job_or_none(kube, "kept")
    assert job is not None and failed_by_deadline(job) is None
    assert agent.deadline_writes >= 1

    # No more renewals: the deadline stays by the last lease, until the agent fences.
    hub.lease = None
    await asyncio.sleep(0.1)
    stop_by = agent.lease.stop_by(agent.monotonic(), agent.clock())
    assert stop_by is not None
    last = first
    while (job := await job_or_none(kube, "kept")) is not None:
        last = deadline_of(job)
        assert last <= stop_by + 1  # (whole seconds)
        await asyncio.sleep(0.2)
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "kept"))
    assert evicted.pending_reason == "ClusterLost"


async def _deadline_later_than(kube: KubeClient, name: str, than: float) -> bool:
    job = await job_or_none(kube, name)
    return job is not None and deadline_of(job) > than


async def test_a_users_own_deadline_is_kept_and_its_expiry_is_a_failure(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()  # the default lease: 60 s
    await hub.wait_for(lambda p: isinstance(p, Hello))
    source = job_source("impatient", script="sleep 30")
    source["spec"]["activeDeadlineSeconds"] = 2
    await hub.offer(offer_for(source))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "impatient"))
    job = await job_or_none(kube, "impatient")
    assert job is not None
    assert job["spec"]["activeDeadlineSeconds"] == 2
    assert job["metadata"]["annotations"][USER_DEADLINE_ANNOTATION] == "2"

    failed = await hub.wait_for(status(WorkloadPhase.FAILED, "impatient"), within=15)
    assert "DeadlineExceeded" in failed.conditions[0].message

    relaxed = job_source("relaxed", script="sleep 30")
    relaxed["spec"]["activeDeadlineSeconds"] = 3600
    await hub.offer(offer_for(relaxed))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "relaxed"))
    job = await job_or_none(kube, "relaxed")
    assert job is not None
    assert job["spec"]["activeDeadlineSeconds"] <= 60 + 15  # the lease's is smaller
    assert job["metadata"]["annotations"][USER_DEADLINE_ANNOTATION] == "3600"


async def test_a_frozen_agents_job_is_failed_by_kubernetes_by_its_deadline(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = SHORT
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("abandoned", script="sleep 60")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "abandoned"))

    await agents.stop()  # it renews nothing, fences nothing, deletes nothing from now on
    stop_by = agent.lease.stop_by(agent.monotonic(), agent.clock())
    assert stop_by is not None
    failure = await eventually(
        lambda: _failed_by_deadline(kube, "abandoned"),
        within=SHORT.lease_seconds + SHORT.grace_seconds + 5,
    )
    failed_at = datetime.fromisoformat(failure["lastTransitionTime"]).timestamp()
    assert failed_at <= stop_by + 1  # (the controller's whole-second timestamps)

    # Back, the agent gives the workload back: the cluster lost it, it did not fail.
    hub.envelopes.clear()
    await agents.start()
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "abandoned"))
    assert evicted.pending_reason == "ClusterLost"


async def _failed_by_deadline(kube: KubeClient, name: str) -> dict[str, Any] | None:
    return failed_by_deadline(await job_or_none(kube, name))


async def test_an_agent_restarted_without_a_lease_fences_after_the_last_known_lease_length(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    # A long grace: the Jobs' own deadlines fall well after the fence tested here.
    terms = LeaseTerms(lease_seconds=3, grace_seconds=20)
    hub.lease = terms
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("orphaned", script="sleep 60")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "orphaned"))
    await agents.stop()

    hub.lease = None  # the restarted agent never gets a lease
    started = time.monotonic()
    agent = await agents.start()
    assert agent.lease.terms == terms  # remembered from the last run, not the 60 s default
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "orphaned"), within=10)
    assert time.monotonic() - started >= terms.lease_seconds
    assert "no lease from the hub within 3s" in evicted.pending_message
    assert await job_or_none(kube, "orphaned") is None


async def test_with_fencing_off_jobs_get_no_deadline_and_the_agent_never_fences(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.lease = LeaseTerms(lease_seconds=2, grace_seconds=1, enabled=False)
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("unfenced", script="sleep 30")))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "unfenced"))
    job = await job_or_none(kube, "unfenced")
    assert job is not None and "activeDeadlineSeconds" not in job["spec"]

    hub.lease = None
    await asyncio.sleep(3.0)  # longer than a lease
    assert "team-a/job-unfenced" in agent.admission.held
    assert await job_or_none(kube, "unfenced") is not None


async def test_a_workload_withdrawn_on_reconnect_loses_its_jobs_and_is_never_resumed(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("moved", script="sleep 30"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "moved"))

    # The hub re-dispatched it elsewhere meanwhile: after the Hello it withdraws it here.
    withdraw = Withdraw(workload="team-a/job-moved", generation=1, reason="NotDispatchedHere")
    hub.on_hello = lambda lane: lane.send(withdraw)
    hub.envelopes.clear()
    await hub.drop()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert [w.phase for w in hello.workloads] == [WorkloadPhase.RUNNING]
    gone = await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "moved"))
    assert gone.pending_reason == "NotDispatchedHere"
    await eventually(lambda: _no_job(kube, "moved"))
    assert not agent.admission.held
    await asyncio.sleep(1.0)  # a pass or two later: nothing made it again
    assert await job_or_none(kube, "moved") is None
    after = hub.payloads[hub.payloads.index(gone) + 1 :]
    assert not [r for r in after if status(WorkloadPhase.ADMITTED, "moved")(r)]


async def _no_job(kube: KubeClient, name: str) -> bool:
    return await job_or_none(kube, name) is None


@pytest.mark.slow
@pytest.mark.e2e
async def test_a_stopped_agent_process_has_its_job_failed_by_its_deadline_and_gives_it_back(
    sim: RunningSimulator, hub: FakeHub, kube: KubeClient, tmp_path: Path
) -> None:
    hub.lease = SHORT
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent",
        f"--kubeconfig={sim.kubeconfigs[CLUSTER]}",
        f"--hub={hub.url}",
        f"--cluster={CLUSTER}",
        f"--token-file={token_file}",
        f"--state-dir={tmp_path / 'state'}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        await hub.wait_for(lambda p: isinstance(p, Hello), within=30)
        await hub.offer(offer_for(job_source("frozen", script="sleep 60")))
        await hub.wait_for(status(WorkloadPhase.RUNNING, "frozen"), within=20)
        assert any(isinstance(e.payload, LeaseRenew) for e in hub.envelopes)
        process.send_signal(signal.SIGSTOP)
        frozen_at = time.time()
        await asyncio.sleep(0.3)  # (a renewal already on the wire is granted still)
        # The agent's lease ends no later than the hub's view of its last renewal + lease.
        stop_by = hub.granted_at + SHORT.lease_seconds + SHORT.grace_seconds / 2
        failure = await eventually(
            lambda: _failed_by_deadline(kube, "frozen"),
            within=SHORT.lease_seconds + SHORT.grace_seconds + 5,
        )
        failed_at = datetime.fromisoformat(failure["lastTransitionTime"]).timestamp()
        assert failed_at <= stop_by + 1, (failed_at - frozen_at, stop_by - frozen_at)

        process.send_signal(signal.SIGCONT)
        evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "frozen"), within=15)
        assert evicted.pending_reason == "ClusterLost"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            await process.wait()
