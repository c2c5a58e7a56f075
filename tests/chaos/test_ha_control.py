"""The HA faults' handle on several hubs: it finds the one leader by asking each hub's
`/readyz` (waiting out an election), SIGKILLs the leader only while a standby answers, kills
any hub and says what it was, and restarts a hub with the arguments it first had.

The hubs here are small HTTP servers that answer `/readyz` as multiq-hub does, beside real
processes standing in for the hubs' (killed and restarted for real)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from e2e.chaos.federation import ChaosFederation, HaControl, HaFaultError


class ReadyzHub:
    """A hub's /readyz: {"role": …}; `role` None is a hub that does not answer (down)."""

    def __init__(self, role: str | None) -> None:
        self.role = role
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _readyz(self, _: web.Request) -> web.Response:
        if self.role is None:
            return web.json_response({"ready": False, "role": "follower"}, status=503)
        return web.json_response({"ready": True, "role": self.role})

    async def stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.fixture
async def hubs() -> AsyncIterator[list[ReadyzHub]]:
    found = [ReadyzHub("leader"), ReadyzHub("follower")]
    for hub in found:
        await hub.start()
    yield found
    for hub in found:
        await hub.stop()


@pytest.fixture
def control(tmp_path: Path, hubs: list[ReadyzHub]) -> Iterator[HaControl]:
    fed = ChaosFederation(tmp_path, ha=2)
    fed.hub_ports = [hub.port for hub in hubs]
    for name in fed.hub_names:
        fed._spawn(name, ["sleep", "600"], detach=False)  # each hub's process
    yield HaControl(fed)
    fed.stop()


async def test_the_leader_is_the_hub_whose_readyz_says_so(
    control: HaControl, hubs: list[ReadyzHub]
) -> None:
    assert await control.roles() == {"hub-0": "leader", "hub-1": "follower"}
    assert await control.leader() == "hub-0"
    hubs[0].role, hubs[1].role = "follower", "leader"
    assert await control.leader() == "hub-1"


async def test_the_leader_is_waited_for_while_an_election_is_under_way(
    control: HaControl, hubs: list[ReadyzHub]
) -> None:
    hubs[0].role = "follower"

    async def elect() -> None:
        await asyncio.sleep(0.5)
        hubs[1].role = "leader"

    election = asyncio.create_task(elect())
    assert await control.leader(within=5) == "hub-1"
    await election
    hubs[1].role = "follower"
    with pytest.raises(HaFaultError, match="no single hub led within 0s"):
        await control.leader(within=0)


async def test_the_leader_is_killed_while_the_standby_keeps_running(control: HaControl) -> None:
    fed = control.fed
    standby = fed.process("hub-1")
    assert await control.kill_leader() == "hub-0"
    assert fed.exited("hub-0")
    assert fed.process("hub-1") == standby and not fed.exited("hub-1")
    await control.restart_hub("hub-0")
    assert not fed.exited("hub-0")


async def test_without_a_standby_answering_the_leader_is_not_killed(
    control: HaControl, hubs: list[ReadyzHub]
) -> None:
    hubs[1].role = None
    with pytest.raises(HaFaultError, match="no standby hub runs beside the leader hub-0"):
        await control.kill_leader()
    assert not control.fed.exited("hub-0")


async def test_any_hub_may_be_killed_and_its_role_before_is_told(control: HaControl) -> None:
    assert await control.kill_hub("hub-1") == "follower"
    assert control.fed.exited("hub-1") and not control.fed.exited("hub-0")
