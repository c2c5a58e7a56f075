"""A cancelled workload's logs reach the hub before its Jobs go, without the admission loop
waiting and within a bound; a preempted one's Jobs go at once and its logs reach the hub
before its Evicted report; a withdrawal stops at once and ships nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from agent.k8s.client import KubeClient, Resource
from api.v1alpha1.messages import Cancel, Hello, LogData, Withdraw, WorkloadPhase
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    config,
    eventually,
    job_source,
    offer_for,
    status,
)


def shipped_texts(hub: FakeHub, key: str) -> list[str]:
    return [
        line.text
        for p in hub.log_payloads()
        if isinstance(p, LogData) and p.shipped and p.workload == key
        for line in p.lines
    ]


async def live_jobs(kube: KubeClient) -> list[str]:
    listed = await kube.list(Resource.JOBS, namespace="team-a")
    return [
        j["metadata"]["name"] for j in listed.items if not j["metadata"].get("deletionTimestamp")
    ]


async def pod_said(kube: KubeClient, text: str) -> bool:
    pods = await kube.list(Resource.PODS, namespace="team-a")
    for pod in pods.items:
        lines = [line async for line in kube.pod_log("team-a", pod["metadata"]["name"])]
        if any(line.endswith(text) for line in lines):
            return True
    return False


async def test_a_cancelled_workloads_lines_are_at_the_hub_once_its_jobs_are_gone(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("cancelled", script="echo first; echo second; sleep 60"))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "cancelled"), within=20)
    await eventually(lambda: pod_said(kube, "second"), within=20)
    await hub.send(Cancel(workload=key, generation=1, reason="UserDelete"))
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "cancelled"), within=20)
    # The report follows the stop: the Jobs are gone, and the lines were read before.
    assert await live_jobs(kube) == []
    assert shipped_texts(hub, key) == ["first", "second"]


async def test_a_preempted_workloads_jobs_go_at_once_and_its_lines_reach_the_hub_first(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    # Its quota is the preemptor's the moment it is given back: the ship's reads are opened,
    # the Jobs go, and the ship reads on; the Evicted report waits for the ship, since the
    # hub takes the generation's lines only while it is bound there.
    agents.overrides = {"log_ship_stop_wait_seconds": 30.0}
    hub.config = config(preempt=True)
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    # What it prints as it is stopped (SIGTERM) is shipped too: the ship follows its log.
    # It takes 4 s to stop, so its ship cannot end before the Jobs are seen gone (its few
    # lines alone would fit the sockets' buffers even while the hub does not read).
    script = "trap 'echo low-bye; sleep 4; exit 0' TERM; echo low-1; echo low-2; sleep 60 & wait"
    low = offer_for(job_source("low", cpu="2", script=script), priority=1)
    key = f"team-a/{low.workload.metadata.name}"
    await hub.offer(low)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "low"), within=20)
    await eventually(lambda: pod_said(kube, "low-2"), within=20)
    hub.logs_paused.clear()  # the ship cannot finish while the hub does not read
    loop = asyncio.get_running_loop()
    offered_at = loop.time()
    await hub.offer(offer_for(job_source("high", cpu="2", script="true"), priority=100))

    async def low_jobs_gone() -> bool:
        return not [name for name in await live_jobs(kube) if name.startswith("low")]

    await eventually(low_jobs_gone, within=10)
    assert loop.time() - offered_at < 5.0
    assert not any(status(WorkloadPhase.EVICTED, "low")(p) for p in hub.payloads)
    hub.logs_paused.set()
    evicted = await hub.wait_for(status(WorkloadPhase.EVICTED, "low"), within=20)
    assert evicted.pending_reason == "Preempted"
    assert shipped_texts(hub, key) == ["low-1", "low-2", "low-bye"]
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "high"), within=20)


async def test_a_silent_preempted_workload_is_stopped_without_waiting_the_open_bound(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    # Its log has no first line to wait for: the read is open once the API server answered.
    agents.overrides = {"log_ship_open_wait_seconds": 10.0}
    hub.config = config(preempt=True)
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.offer(offer_for(job_source("quiet", cpu="2", script="sleep 60"), priority=1))
    await hub.wait_for(status(WorkloadPhase.RUNNING, "quiet"), within=20)
    loop = asyncio.get_running_loop()
    offered_at = loop.time()
    await hub.offer(offer_for(job_source("high", cpu="2", script="true"), priority=100))
    await hub.wait_for(status(WorkloadPhase.EVICTED, "quiet"), within=20)
    assert loop.time() - offered_at < 5.0
    assert not [name for name in await live_jobs(kube) if name.startswith("quiet")]


class _StalledLogReads:
    """The cluster, except that a log read stalls after its first line (an API server behind
    a kubelet that stopped answering): a ship of that log cannot finish. (A hub that stops
    reading the log lane is no such test: the sockets' buffers on loopback hold megabytes.)"""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    async def pod_log(self, namespace: str, name: str, **kwargs: Any) -> AsyncIterator[str]:
        async for line in self._kube.pod_log(namespace, name, **kwargs):
            yield line
            await asyncio.sleep(3600)


async def test_a_cancel_whose_ship_hangs_stops_after_the_bound_and_the_loop_goes_on(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agents.overrides = {"log_ship_stop_wait_seconds": 4.0}
    agents.kube = cast(KubeClient, _StalledLogReads(kube))
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    noisy = offer_for(job_source("noisy", script="echo one; echo two; sleep 60", cpu="100m"))
    key = f"team-a/{noisy.workload.metadata.name}"
    await hub.offer(noisy)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "noisy"), within=20)
    await eventually(lambda: pod_said(kube, "two"), within=20)
    loop = asyncio.get_running_loop()
    cancelled_at = loop.time()
    await hub.send(Cancel(workload=key, generation=1, reason="UserDelete"))
    # Meanwhile the admission loop goes on: another workload is admitted while the stop waits.
    await hub.offer(offer_for(job_source("quiet", script="true", cpu="100m")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "quiet"), within=20)
    assert not any(status(WorkloadPhase.WITHDRAWN, "noisy")(p) for p in hub.payloads)
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "noisy"), within=20)
    took = loop.time() - cancelled_at
    assert 4.0 <= took < 15.0
    assert not [name for name in await live_jobs(kube) if name.startswith("noisy")]
    # The ship was cut off: the line it read before the stall went out, then the eofs.
    frames = [p for p in hub.log_payloads() if isinstance(p, LogData) and p.workload == key]
    assert [([line.text for line in f.lines], f.pod != "", f.eof) for f in frames] == [
        (["one"], True, False),
        ([], True, True),
        ([], False, True),
    ]


async def test_a_withdrawal_stops_at_once_and_ships_nothing(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    agents.overrides = {"log_ship_stop_wait_seconds": 30.0}
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("moved", script="echo here; sleep 60"))
    key = f"team-a/{offer.workload.metadata.name}"
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "moved"), within=20)
    await eventually(lambda: pod_said(kube, "here"), within=20)
    hub.logs_paused.clear()  # a ship, if one started, could not finish within the test
    loop = asyncio.get_running_loop()
    withdrawn_at = loop.time()
    await hub.send(Withdraw(workload=key, generation=1, reason="Redispatch"))
    await hub.wait_for(status(WorkloadPhase.WITHDRAWN, "moved"), within=10)
    assert loop.time() - withdrawn_at < 5.0
    assert await live_jobs(kube) == []
    hub.logs_paused.set()
    await asyncio.sleep(0.5)
    assert shipped_texts(hub, key) == []
