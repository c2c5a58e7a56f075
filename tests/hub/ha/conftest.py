"""Several real hubs (aiohttp servers on loopback ports) on one real etcd, as several
`multiq-hub` processes would share one: each has its own etcd client, all share one root."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer, unused_port

from hub.app import build_app
from hub.election import ELECTION, Campaign, Won
from hub.settings import HubSettings
from hub.store.etcd import EtcdElection, EtcdStore, Leadership
from hub.store.localetcd import LocalEtcd
from tests.hub.service.conftest import HubUnderTest, _write_users

TTL = 2  # etcd's minimum lease TTL with default timings


class UnawareCampaign:
    """Campaigns in etcd like `EtcdCampaign`, but its hub learns that a term ended only when
    the test says so (`tell_ended`) — as a hub that was frozen, or cut off from etcd, learns
    it late. Its lease can be taken away meanwhile (`revoke`)."""

    alone = False

    def __init__(self, store: EtcdStore, url: str) -> None:
        self.store = store
        self.url = url
        self.leadership: Leadership | None = None
        self._election: EtcdElection | None = None
        self._ended = asyncio.Event()

    async def win(self) -> Won:
        self._ended = asyncio.Event()
        self._election = EtcdElection(self.store, ELECTION, ttl=TTL)
        self.leadership = await self._election.campaign(self.url)
        return Won(self.store.fenced(self.leadership), int(self.leadership.revision), self._ended)

    async def revoke(self) -> None:
        """The lease goes in etcd (as when etcd expires it); the hub is not told."""
        assert self.leadership is not None
        await self.store._lease_revoke(self.leadership.lease_id)

    def tell_ended(self) -> None:
        self._ended.set()

    async def give_up(self) -> None:
        if self._election is not None:
            await self._election.resign()

    async def leaders(self) -> AsyncIterator[str | None]:
        observer = EtcdElection(self.store, ELECTION)
        async for leader in observer.observe():
            yield leader


@dataclass
class Hubs:
    """Hubs sharing one etcd root; start them with `start`, all closed at the end."""

    etcd: LocalEtcd
    tmp: Path
    session: aiohttp.ClientSession
    root: str = field(default_factory=lambda: f"/test-{uuid.uuid4().hex[:12]}")
    started: list[HubUnderTest] = field(default_factory=list)
    _stores: list[EtcdStore] = field(default_factory=list)

    async def start(
        self,
        *,
        campaign: Callable[[EtcdStore, str], Campaign] | None = None,
        forward_wait_seconds: float = 10.0,
    ) -> HubUnderTest:
        port = unused_port()
        url = f"http://127.0.0.1:{port}"
        store = await EtcdStore.connect(self.etcd.host, self.etcd.port, root=self.root)
        self._stores.append(store)
        settings = HubSettings(
            store=f"etcd://{self.etcd.host}:{self.etcd.port}",
            users_file=self.tmp / "users.yaml",
            secrets_dir=self.tmp / "secrets",
            advertise_url=url,
            election_ttl_seconds=TTL,
            forward_wait_seconds=forward_wait_seconds,
            offer_timeout_seconds=5,
            dispatch_interval_seconds=0.1,
            queue_status_interval_seconds=0.1,
        )
        app = await build_app(
            settings, store=store, campaign=campaign(store, url) if campaign else None
        )
        server = TestServer(app, host="127.0.0.1", port=port)
        await server.start_server()
        hub = HubUnderTest(server, self.tmp, self.session)
        self.started.append(hub)
        return hub

    async def role(self, hub: HubUnderTest) -> str:
        status, body = await hub.call("GET", "/readyz", token=None)
        assert status == 200, body
        return str(body["role"])

    async def leader(self, within: float = 10.0) -> HubUnderTest:
        """The one hub that leads, once exactly one does."""
        async with asyncio.timeout(within):
            while True:
                roles = [await self.role(h) for h in self.running]
                if roles.count("leader") == 1:
                    return self.running[roles.index("leader")]
                await asyncio.sleep(0.05)

    async def until_role(self, hub: HubUnderTest, role: str, within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while True:
                if await self.role(hub) == role:
                    return
                await asyncio.sleep(0.05)

    async def mirrored(self, cluster: str, within: float = 5.0) -> None:
        """Every running hub's mirror knows the MemberCluster (and so its agent's token)."""
        async with asyncio.timeout(within):
            for hub in self.running:
                while hub.hub.fleet.get(cluster) is None:  # noqa: ASYNC110  (no event for it)
                    await asyncio.sleep(0.02)

    @property
    def running(self) -> list[HubUnderTest]:
        return [h for h in self.started if not h.server.closed]

    async def close(self) -> None:
        for hub in self.running:
            await hub.server.close()
        for store in self._stores:
            await store.close()


@pytest.fixture
async def hubs(etcd_server: LocalEtcd, tmp_path: Path) -> AsyncIterator[Hubs]:
    _write_users(tmp_path)
    async with aiohttp.ClientSession() as session:
        group = Hubs(etcd_server, tmp_path, session)
        yield group
        await group.close()
