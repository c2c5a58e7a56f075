"""Agents and qctl given several hubs follow the leader: an agent dials the hubs in order and
goes straight to the leader a follower names, and after losing its leader is back with the
new one in seconds; qctl moves on from a hub it cannot reach, and any live hub serves it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.hubclient import HubSession
from agent.settings import AgentSettings, Timings
from api.v1alpha1.federation import MemberCluster
from api.v1alpha1.messages import ConfigSync, Hello, LogClose, LogOpen, Payload, TraceContext
from api.v1alpha1.queues import ResourceFlavor
from hub.store.etcd import EtcdStore
from qctl.client import HubClient
from qctl.config import ResolvedContext
from qctl.errors import QctlError
from tests.hub.ha.conftest import Hubs, UnawareCampaign
from tests.hub.service.conftest import ADMIN as ADMIN_TOKEN
from tests.hub.service.conftest import AGENT_TOKENS, HubUnderTest, fleet_objects

DEAD_HUB = "http://127.0.0.1:9"  # nothing listens there


class AgentUnderTest:
    """An agent's hub session alone (no cluster behind it), recording what the hub sends."""

    def __init__(self, hub_urls: list[str], tmp: Path) -> None:
        self.received: list[Payload] = []
        self.session = HubSession(
            AgentSettings(
                cluster="east",
                hub=",".join(hub_urls),
                token=AGENT_TOKENS["east"],
                state_dir=tmp / "agent-east",
                timings=Timings(reconnect_initial=0.1, reconnect_quick_max=0.5),
            ),
            hello=lambda: Hello(cluster="east", agent_version="test-0"),
            on_connect=self._nothing,
            on_message=self._received,
            on_log_message=self._log_message,
        )
        self.task: asyncio.Task[None] | None = None

    async def _nothing(self) -> None:
        return None

    async def _received(self, payload: Payload, _trace: TraceContext | None, _text: str) -> None:
        self.received.append(payload)

    async def _log_message(self, payload: LogOpen | LogClose) -> None:
        return None

    def start(self) -> None:
        self.task = asyncio.create_task(self.session.run())

    async def connected_to(self, url: str, within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while True:
                if self.session.connected.is_set() and self.session.hub_url == url:
                    return
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
async def agents(tmp_path: Path) -> AsyncIterator[list[AgentUnderTest]]:
    started: list[AgentUnderTest] = []
    yield started
    for agent in started:
        await agent.stop()


async def connected_at(hub: HubUnderTest, cluster: str) -> bool:
    _, member = await hub.call("GET", f"/apis/multiq.dev/v1alpha1/memberclusters/{cluster}")
    return bool((member.get("status") or {}).get("connected"))


async def eventually(check: Any, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.05)


# --- agents ------------------------------------------------------------------------------


async def test_an_agent_given_several_hubs_goes_to_the_leader_a_follower_names(
    hubs: Hubs, agents: list[AgentUnderTest], tmp_path: Path
) -> None:
    leader = await hubs.start()
    await hubs.leader()
    follower = await hubs.start()
    await leader.apply(*fleet_objects())
    await hubs.mirrored("east")

    agent = AgentUnderTest([DEAD_HUB, follower.url, leader.url], tmp_path)
    agents.append(agent)
    agent.start()
    await agent.connected_to(leader.url)

    await eventually(lambda: connected_at(follower, "east"))
    assert any(isinstance(p, ConfigSync) for p in agent.received)


async def test_an_agent_whose_leader_steps_down_is_with_the_new_leader_in_seconds(
    hubs: Hubs, agents: list[AgentUnderTest], tmp_path: Path
) -> None:
    campaigns: list[UnawareCampaign] = []

    def unaware(store: EtcdStore, url: str) -> UnawareCampaign:
        campaigns.append(UnawareCampaign(store, url))
        return campaigns[-1]

    old = await hubs.start(campaign=unaware)
    await hubs.leader()
    new = await hubs.start()
    await old.apply(*fleet_objects())
    await hubs.mirrored("east")
    agent = AgentUnderTest([old.url, new.url], tmp_path)
    agents.append(agent)
    agent.start()
    await agent.connected_to(old.url)

    await campaigns[0].revoke()
    await hubs.until_role(new, "leader")
    campaigns[0].tell_ended()  # the old leader steps down and closes the session

    # It dials the hub it knew first, is told where the leader is, and goes there.
    await agent.connected_to(new.url, within=5)
    assert agent.session.connections == 2


async def test_an_agent_whose_leader_shut_down_is_with_the_next_leader_at_once(
    hubs: Hubs, agents: list[AgentUnderTest], tmp_path: Path
) -> None:
    first = await hubs.start()
    await hubs.leader()
    second = await hubs.start()
    await first.apply(*fleet_objects())
    await hubs.mirrored("east")
    agent = AgentUnderTest([first.url, second.url], tmp_path)
    agents.append(agent)
    agent.start()
    await agent.connected_to(first.url)

    await first.server.close()
    await agent.connected_to(second.url, within=10)
    await eventually(lambda: connected_at(second, "east"))


# --- qctl --------------------------------------------------------------------------------


def context(*urls: str) -> ResolvedContext:
    return ResolvedContext(",".join(urls), ADMIN_TOKEN, "default", "test")


async def test_qctl_moves_on_from_a_hub_it_cannot_reach_and_any_hub_serves_any_request(
    hubs: Hubs,
) -> None:
    leader = await hubs.start()
    await hubs.leader()
    follower = await hubs.start()
    flavor = {"apiVersion": "multiq.dev/v1alpha1", "kind": "ResourceFlavor"}

    async with HubClient(context(DEAD_HUB, follower.url, leader.url)) as client:
        created = await client.create(ResourceFlavor, {**flavor, "metadata": {"name": "a"}})
        assert created["metadata"]["name"] == "a"
        assert client.server == follower.url  # a follower served it (forwarded to the leader)
        listed = await client.list(MemberCluster, None)
        assert listed == []

    async with HubClient(context(leader.url, follower.url)) as client:
        await client.create(ResourceFlavor, {**flavor, "metadata": {"name": "b"}})
        await leader.server.close()
        # The leader is gone: the follower answers reads at once, and writes once it leads.
        names = [f["metadata"]["name"] for f in await client.list(ResourceFlavor, None)]
        assert names == ["a", "b"]
        await client.create(ResourceFlavor, {**flavor, "metadata": {"name": "c"}})
        assert client.server == follower.url


async def test_qctl_says_which_hubs_it_could_not_reach() -> None:
    async with HubClient(context(DEAD_HUB, "http://127.0.0.1:7")) as client:
        with pytest.raises(QctlError, match=r"cannot reach any hub:\n  http://127.0.0.1:9"):
            await client.list(ResourceFlavor, None)
