"""The agent survives its own restart, a lost hub connection and an expired watch: no
duplicate Jobs, status resumes, held workloads are announced, the last config is kept."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

from agent.k8s.client import Kube, KubeClient, ObjectList, Resource
from agent.state import StateStore
from api.v1alpha1.messages import Hello, WorkloadPhase
from kubesim.testing import RunningSimulator
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    config,
    eventually,
    job_source,
    offer_for,
    status,
)


async def jobs_of(kube: KubeClient, uid: str) -> list[str]:
    listed = await kube.list(Resource.JOBS, label_selector=f"multiq.dev/workload-uid={uid}")
    return [j["metadata"]["name"] for j in listed.items]


async def test_an_agent_restarted_mid_run_creates_no_second_job_and_reports_the_finish(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("long", script="sleep 1.5; echo done"))
    # The hub re-sends open offers after every Hello, as the real one does.
    hub.on_hello = lambda lane: lane.send(offer)
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "long"))

    await agents.stop()
    # The offer was persisted in the envelope it came in, as the hub's lane delivered it.
    (persisted,) = StateStore(agents.state_dir).load_all(lambda offer_text, _: offer_text)
    envelope = json.loads(persisted)
    assert envelope["type"] == "DispatchOffer" and envelope["seq"] >= 1
    assert envelope["payload"]["workload"]["metadata"]["name"] == offer.workload.metadata.name
    hub.envelopes.clear()
    await agents.start()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert [(w.workload, w.generation, w.phase) for w in hello.workloads] == [
        (f"team-a/{offer.workload.metadata.name}", 1, WorkloadPhase.RUNNING)
    ]
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "long"), within=20)
    assert done.generation == 1
    assert await jobs_of(kube, "uid-long") == ["long"]


async def test_an_agent_that_lost_its_state_adopts_the_job_it_finds(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("adopted", script="sleep 1.2"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "adopted"))
    job = await kube.get(Resource.JOBS, "team-a", "adopted")

    await agents.stop()
    shutil.rmtree(agents.state_dir)
    hub.envelopes.clear()
    hub.on_hello = lambda lane: lane.send(offer)
    await agents.start()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hello.workloads == []  # it holds nothing: the hub re-offers what it bound here
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "adopted"))
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "adopted"), within=20)
    again = await kube.get(Resource.JOBS, "team-a", "adopted")
    assert again["metadata"]["uid"] == job["metadata"]["uid"]
    assert await jobs_of(kube, "uid-adopted") == ["adopted"]


async def test_a_dropped_hub_connection_is_redialled_with_a_hello_and_the_config_is_kept(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("kept", script="sleep 0.8"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "kept"))

    # The hub goes away and refuses the agent while the job finishes; it sends no config
    # when it comes back, so the agent must keep the one it had.
    hub.refuse = True
    hub.config = None
    await hub.drop()
    await eventually(lambda: not agent.session.connected.is_set())
    hub.envelopes.clear()
    await eventually(
        lambda: agent.admission.held[f"team-a/{offer.workload.metadata.name}"].finished, within=20
    )
    hub.refuse = False

    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hello.config_revision == 1
    assert [w.phase for w in hello.workloads] == [WorkloadPhase.SUCCEEDED]
    # What happened while disconnected is delivered after the Hello.
    done = await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "kept"))
    assert hub.payloads.index(hello) < hub.payloads.index(done)
    assert hub.connects == 2

    second = offer_for(job_source("after", script="true"))
    await hub.offer(second)
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "after"))


async def test_an_expired_watch_is_relisted_and_the_agent_keeps_seeing_its_jobs(
    agents: AgentRunner, hub: FakeHub, sim: RunningSimulator, kube: KubeClient
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    cluster = sim.clusters[0]
    before = agent.inventory.pods.relists
    # A change the agent's watches do not see, then history is forgotten: resuming from
    # the agent's resourceVersion now answers 410.
    await kube.create(Resource.NAMESPACES, None, {"metadata": {"name": "bump"}})
    cluster.store.compact()
    cluster.api.watches.drop_all()
    await eventually(lambda: agent.inventory.pods.relists > before)
    await eventually(lambda: agent.inventory.jobs.relists > 1)

    offer = offer_for(job_source("relisted", script="true"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "relisted"), within=20)


async def test_jobs_of_workloads_the_agent_lost_and_the_hub_does_not_re_offer_are_reaped(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("orphan", script="sleep 30"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "orphan"))

    await agents.stop()
    shutil.rmtree(agents.state_dir)
    hub.envelopes.clear()
    await agents.start()  # the hub moved it elsewhere meanwhile: no re-offer
    await hub.wait_for(lambda p: isinstance(p, Hello))
    assert await jobs_of(kube, "uid-orphan") == ["orphan"]
    await eventually(lambda: _gone(kube, "uid-orphan"), within=5)


async def _gone(kube: KubeClient, uid: str) -> bool:
    return await jobs_of(kube, uid) == []


async def test_a_hub_that_dies_without_closing_its_sockets_is_redialled(
    agents: AgentRunner, hub: FakeHub
) -> None:
    agent = await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    hub.kill()  # TCP reset on both lanes at once, no WebSocket close frames
    await eventually(lambda: hub.connects == 2 and agent.session.connected.is_set())
    assert hub.log_connects >= 2


async def test_after_a_reconnect_the_latest_report_of_each_held_workload_is_sent_again(
    agents: AgentRunner, hub: FakeHub
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    offer = offer_for(job_source("again-and-again", script="sleep 30"))
    await hub.offer(offer)
    await hub.wait_for(status(WorkloadPhase.RUNNING, "again-and-again"))
    # The hub acknowledges everything (a later message carries the ack) ...
    await hub.send(config(revision=2))
    await asyncio.sleep(0.3)
    # ... then loses it all, as a hub killed before storing would.
    hub.envelopes.clear()
    await hub.drop()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    again = await hub.wait_for(status(WorkloadPhase.RUNNING, "again-and-again"))
    assert hub.payloads.index(hello) < hub.payloads.index(again)


class VersionAfterListing:
    """The agent's client, answering the server-version read only once the cluster has been
    listed: an agent that read the version first would wait for ever."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self.listed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    async def list(self, resource: Resource, **kwargs: Any) -> ObjectList:
        listed = await self._kube.list(resource, **kwargs)
        self.listed.set()
        return listed

    async def server_version(self) -> str:
        await self.listed.wait()
        return await self._kube.server_version()


async def test_the_agent_lists_its_cluster_while_it_reads_the_server_version(
    agents: AgentRunner, hub: FakeHub
) -> None:
    # While the API server fails, the version read and the first listing each wait out their
    # retries: side by side, the agent says Hello after the longer of the two, not their sum.
    agents.kube = VersionAfterListing(agents.kube)  # type: ignore[assignment]
    await agents.start()
    hello = await hub.wait_for(lambda p: isinstance(p, Hello))
    assert hello.inventory.kubernetes_version  # (read before the Hello all the same)
