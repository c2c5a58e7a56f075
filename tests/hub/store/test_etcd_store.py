"""What only the etcd store offers: leader election among hub replicas, and its behaviour
when etcd is unreachable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hub.store.base import (
    AlreadyExists,
    Conflict,
    NotFound,
    NotLeader,
    Revision,
    Unavailable,
)
from hub.store.etcd import Endpoint, EtcdElection, EtcdStore, _Endpoints
from hub.store.localetcd import LocalEtcd
from qctl.commands.dev import free_port
from tests.hub.store.conftest import connect_etcd

TTL = 2  # etcd's minimum lease TTL with default timings


@pytest.fixture
async def two_hubs(etcd_server: LocalEtcd) -> AsyncIterator[tuple[EtcdStore, EtcdStore]]:
    """Two clients sharing one root, as two hub replicas of one installation would."""
    first = await connect_etcd(etcd_server)
    second = await EtcdStore.connect(etcd_server.host, etcd_server.port, root=first._root)
    yield first, second
    await first.close()
    await second.close()


async def test_of_two_candidates_one_leads_and_the_other_takes_over_when_its_lease_is_lost(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)

    a_lead = await asyncio.wait_for(a.campaign("hub-a"), 5)
    b_campaign = asyncio.create_task(b.campaign("hub-b"))
    await asyncio.sleep(0.3)
    assert not b_campaign.done()
    assert await b.leader() == "hub-a"

    # The leader's lease disappears (as when etcd expires it during a long pause).
    await b_store._lease_revoke(a_lead.lease_id)

    b_lead = await asyncio.wait_for(b_campaign, 5)
    assert b_lead.revision > a_lead.revision  # usable as a fencing token
    assert await a.leader() == "hub-b"
    await asyncio.wait_for(a_lead.lost.wait(), TTL + 1)  # the old leader notices
    assert not b_lead.lost.is_set()
    await b.resign()


async def test_resigning_hands_leadership_over_at_once(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)
    a_lead = await a.campaign("hub-a")
    b_campaign = asyncio.create_task(b.campaign("hub-b"))
    await asyncio.sleep(0.1)

    await a.resign()

    await asyncio.wait_for(b_campaign, 2)
    assert a_lead.lost.is_set()
    assert await a.leader() == "hub-b"
    await b.resign()
    assert await a.leader() is None


@pytest.mark.slow
async def test_a_leader_keeps_its_lease_alive_beyond_the_ttl(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, _ = two_hubs
    a = EtcdElection(a_store, "hub", ttl=TTL)
    lead = await a.campaign("hub-a")

    await asyncio.sleep(TTL * 1.5)

    assert not lead.lost.is_set()
    assert await a.leader() == "hub-a"
    await a.resign()


@pytest.mark.slow
async def test_a_frozen_leader_loses_to_the_next_candidate_after_its_ttl(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)
    await a.campaign("hub-a")
    b_campaign = asyncio.create_task(b.campaign("hub-b"))

    # Freeze the leader's keep-alive, as a stalled process would.
    assert a._keepalive is not None
    a._keepalive.cancel()

    await asyncio.wait_for(b_campaign, TTL + 3)
    assert await b.leader() == "hub-b"
    await b.resign()


async def test_observers_see_every_change_of_leader(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)
    seen: list[str | None] = []

    async with contextlib.aclosing(EtcdElection(a_store, "hub").observe()) as leaders:
        seen.append(await anext(leaders))
        await a.campaign("hub-a")
        seen.append(await asyncio.wait_for(anext(leaders), 2))
        b_campaign = asyncio.create_task(b.campaign("hub-b"))
        async with asyncio.timeout(2):
            while len((await b._candidates())[0]) < 2:  # noqa: ASYNC110  (b queues behind a)
                await asyncio.sleep(0.01)
        await a.resign()
        seen.append(await asyncio.wait_for(anext(leaders), 2))
        await b_campaign
        await b.resign()
        seen.append(await asyncio.wait_for(anext(leaders), 2))

    assert seen == [None, "hub-a", "hub-b", None]


async def test_an_unreachable_etcd_raises_unavailable() -> None:
    port = free_port()  # nothing listens there
    store = await EtcdStore.connect("127.0.0.1", port, root="/nowhere", request_timeout=1)
    try:
        with pytest.raises(Unavailable):
            await store.get("/x/a")
        with pytest.raises(Unavailable):
            await store.create("/x/a", {})
    finally:
        await store.close()


@pytest.mark.slow
async def test_a_watch_ends_with_unavailable_when_etcd_dies(tmp_path: Path) -> None:
    server = await asyncio.to_thread(LocalEtcd.start, tmp_path / "etcd")
    try:
        store = await connect_etcd(server, request_timeout=1)
        start = await store.current_revision()
        async with store.watch("/w/", since=start) as events:
            await store.create("/w/a", {})
            async with asyncio.timeout(5):
                assert (await anext(events)).key == "/w/a"

            await asyncio.to_thread(server.kill)

            with pytest.raises(Unavailable):
                async with asyncio.timeout(10):
                    await anext(events)
        with pytest.raises(Unavailable):
            await store.list("/w/")
        await store.close()
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_cancelled_campaign_withdraws_its_candidate(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)
    await a.campaign("hub-a")
    b_campaign = asyncio.create_task(b.campaign("hub-b"))
    async with asyncio.timeout(2):
        while len((await b._candidates())[0]) < 2:  # noqa: ASYNC110  (b queues behind a)
            await asyncio.sleep(0.01)

    b_campaign.cancel()
    with pytest.raises(asyncio.CancelledError):
        await b_campaign

    assert len((await a._candidates())[0]) == 1
    await a.resign()
    assert await a.leader() is None


async def test_a_deposed_leaders_fenced_writes_fail_and_write_nothing(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)
    a_lead = await a.campaign("hub-a")
    as_leader = a_store.fenced(a_lead)
    obj = await as_leader.create("/w/a", {"by": "a"})
    obj = await as_leader.update("/w/a", {"by": "a", "n": 2}, expected=obj.revision)

    # a is deposed (its lease revoked) but has not noticed yet; b takes over.
    await b_store._lease_revoke(a_lead.lease_id)
    b_lead = await asyncio.wait_for(b.campaign("hub-b"), 5)

    with pytest.raises(NotLeader):
        await as_leader.create("/w/b", {"by": "a"})
    with pytest.raises(NotLeader):
        await as_leader.create_with("/w/c", {"by": "a"}, put={"/w/d": {"by": "a"}})
    with pytest.raises(NotLeader):
        await as_leader.update("/w/a", {"by": "a", "n": 3}, expected=obj.revision)
    with pytest.raises(NotLeader):
        await as_leader.delete("/w/a", expected=None)
    assert [(o.key, o.value) for o in (await a_store.list("/w/")).items] == [
        ("/w/a", {"by": "a", "n": 2})
    ]
    # Reads through the view, and unfenced writes, still work; the new leader's fence holds.
    assert (await as_leader.get("/w/a")).revision == obj.revision
    await b_store.fenced(b_lead).update("/w/a", {"by": "b"}, expected=obj.revision)
    await as_leader.close()  # a view: the shared client stays open
    assert (await a_store.get("/w/a")).value == {"by": "b"}
    await b.resign()


async def test_fenced_writes_report_ordinary_failures_while_leading(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, _ = two_hubs
    a = EtcdElection(a_store, "hub", ttl=TTL)
    view = a_store.fenced(await a.campaign("hub-a"))
    created = await view.create("/w/a", {})

    with pytest.raises(AlreadyExists):
        await view.create("/w/a", {})
    with pytest.raises(Conflict):
        await view.update("/w/a", {}, expected=Revision(created.revision - 1))
    with pytest.raises(NotFound):
        await view.delete("/w/missing", expected=None)
    await a.resign()


# --- stopping: a cancelled campaign never leads; a close ends all it started, in bounded time ---


async def test_a_campaign_cancelled_just_as_the_key_ahead_of_it_goes_ends_cancelled(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    # As when a follower hub shuts down while the leader resigns: the cancellation used to be
    # swallowed in the few loop turns after the deletion, the campaign went on to lead, and
    # the hub's shutdown waited for its election task forever.
    a_store, b_store = two_hubs
    watching, ahead_gone = asyncio.Event(), asyncio.Event()

    class Follower(EtcdElection):
        @staticmethod
        async def _first_delete(watch: Any) -> None:
            watching.set()
            await EtcdElection._first_delete(watch)
            ahead_gone.set()

    cancelled_on_its_way = 0
    for turns in [*range(6), *range(6)]:  # the window moves a turn or two between runs
        watching.clear()
        ahead_gone.clear()
        a, b = EtcdElection(a_store, "hub", ttl=TTL), Follower(b_store, "hub", ttl=TTL)
        await a.campaign("hub-a")
        b_campaign = asyncio.create_task(b.campaign("hub-b"))
        # b queued behind a and watches a's key. (Seeing b's key was not enough: on a busy
        # machine a could resign before b's first look, and b then led without waiting.)
        async with asyncio.timeout(2):
            await watching.wait()

        await a.resign()
        async with asyncio.timeout(5):
            await ahead_gone.wait()
        for _ in range(turns):
            await asyncio.sleep(0)
        if b_campaign.done():  # b leads already (a fast etcd): too late to cancel on its way
            await b.resign()
            continue
        b_campaign.cancel()

        await asyncio.wait({b_campaign}, timeout=5)
        assert b_campaign.cancelled(), f"cancelled {turns} loop turns after a went, b led"
        assert await a.leader() is None  # b withdrew its candidate
        cancelled_on_its_way += 1
    assert cancelled_on_its_way >= 6


async def test_closing_a_store_ends_its_leaderships_and_their_lease_refreshes(
    etcd_server: LocalEtcd,
) -> None:
    store = await connect_etcd(etcd_server)
    leadership = await EtcdElection(store, "hub", ttl=TTL).campaign("hub-a")

    await store.close()

    assert leadership.lost.is_set()
    refreshing = [t for t in asyncio.all_tasks() if t.get_name().startswith("etcd-lease:")]
    assert refreshing == []


class _Channel:
    closed = False

    async def close(self) -> None:  # as gRPC's: cancels the calls on it, waits for none
        self.closed = True


class _ClientThatNeverCloses:
    """An aetcd client whose close never returns (as its watcher's shutdown, waiting on a
    watch stream that never ends, would not)."""

    def __init__(self) -> None:
        self.channel = _Channel()

    async def close(self) -> None:
        await asyncio.Event().wait()


async def test_closing_etcd_clients_is_bounded_even_when_a_client_never_closes() -> None:
    stuck = _ClientThatNeverCloses()
    endpoints = _Endpoints([Endpoint("127.0.0.1")], lambda _: stuck, linger=1, close_within=0.2)

    async with asyncio.timeout(2):
        await endpoints.close()

    assert stuck.channel.closed


@pytest.mark.slow
async def test_a_store_closes_in_bounded_time_when_etcd_is_gone(tmp_path: Path) -> None:
    server = await asyncio.to_thread(LocalEtcd.start, tmp_path / "etcd")
    try:
        store = await connect_etcd(server, request_timeout=1)
        leadership = await EtcdElection(store, "hub", ttl=TTL).campaign("hub-a")
        observer = EtcdElection(store, "hub")
        async with contextlib.aclosing(observer.observe()) as leaders:
            assert await anext(leaders) == "hub-a"
            async with store.watch("/w/", since=await store.current_revision()):
                await asyncio.to_thread(server.kill)

                async with asyncio.timeout(5):  # each step waits a request timeout at most
                    await store.close()
        assert leadership.lost.is_set()
    finally:
        await asyncio.to_thread(server.stop)


async def _lose_a_cancellation() -> None:
    """Be cancelled and carry on, as a task does whose cancellation a library lost on the
    way (Python 3.11's wait_for returning a result that came with it, a gRPC call failing
    instead of being cancelled, and a retry after the failure)."""
    with contextlib.suppress(asyncio.CancelledError):
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
        await asyncio.sleep(0)


async def test_a_watch_consumer_whose_cancellation_was_lost_ends_at_its_next_wait(
    etcd_server: LocalEtcd,
) -> None:
    store = await connect_etcd(etcd_server)

    async def consume() -> None:
        async with store.watch("/w/", since=await store.current_revision()) as events:
            await _lose_a_cancellation()
            await anext(events)  # nothing comes: only the cancellation can end this

    consumer = asyncio.create_task(consume())
    await asyncio.wait({consumer}, timeout=5)
    assert consumer.cancelled()
    await store.close()


async def test_a_campaign_whose_cancellation_was_lost_does_not_lead(
    two_hubs: tuple[EtcdStore, EtcdStore],
) -> None:
    a_store, b_store = two_hubs
    a, b = EtcdElection(a_store, "hub", ttl=TTL), EtcdElection(b_store, "hub", ttl=TTL)

    async def campaign() -> None:
        await _lose_a_cancellation()
        await b.campaign("hub-b")  # alone in the election: would lead at once

    b_campaign = asyncio.create_task(campaign())
    await asyncio.wait({b_campaign}, timeout=5)
    assert b_campaign.cancelled()
    assert await a.leader() is None  # b withdrew its candidate
