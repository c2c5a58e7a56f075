"""An etcd store given every member of a cluster keeps working when the member it talks to
dies: reads go on, writes go on after reporting the one whose outcome is unknown, watches are
reopened on another member without missing an event, and a leader keeps its leadership."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.app import open_store
from hub.store.base import Revision, Unavailable
from hub.store.etcd import Endpoint, EtcdElection, EtcdStore, parse_endpoints
from hub.store.localetcd import LocalEtcdCluster
from qctl.commands.dev import free_port

pytestmark = pytest.mark.slow

TTL = 2


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[LocalEtcdCluster]:
    shm = Path("/dev/shm")
    data_dir = Path(
        tempfile.mkdtemp(prefix="multiq-test-etcd3-", dir=shm if shm.is_dir() else None)
    )
    cluster = LocalEtcdCluster.start(data_dir, size=3)
    yield cluster
    cluster.stop()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def cluster(etcd_cluster: LocalEtcdCluster) -> Iterator[LocalEtcdCluster]:
    """The module's cluster, every member running again after each test (restarted from the
    main thread: a member dies with the thread that started it)."""
    yield etcd_cluster
    for member in etcd_cluster.members:
        if not member.running:
            member.restart()


async def _connect(endpoints: str, root: str | None = None) -> EtcdStore:
    return await EtcdStore.connect_to(
        parse_endpoints(endpoints),
        root=root or f"/test-{uuid.uuid4().hex[:12]}",
        request_timeout=2,
    )


def _member_in_use(cluster: LocalEtcdCluster, store: EtcdStore) -> int:
    return next(i for i, m in enumerate(cluster.members) if m.port == store.endpoint.port)


# --- naming endpoints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("etcd://h1:2379,h2:2380,h3", [("h1", 2379), ("h2", 2380), ("h3", 2379)]),
        ("127.0.0.1:12379", [("127.0.0.1", 12379)]),
        ("[::1]:2379, [fe80::1]", [("::1", 2379), ("fe80::1", 2379)]),
    ],
)
def test_endpoints_are_read_as_host_and_port_with_etcds_port_by_default(
    text: str, expected: list[tuple[str, int]]
) -> None:
    assert parse_endpoints(text) == tuple(Endpoint(h, p) for h, p in expected)


@pytest.mark.parametrize("text", ["", "etcd://", "h1:notaport", "h1:0", "h1:70000"])
def test_an_empty_list_or_a_bad_port_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"etcd|endpoint"):
        parse_endpoints(text)


# --- failing over ----------------------------------------------------------------------------


async def test_unreachable_endpoints_in_the_list_are_passed_over(
    cluster: LocalEtcdCluster,
) -> None:
    dead = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"  # nothing listens there
    store = await _connect(f"{dead},{cluster.members[1].endpoint}")
    try:
        # Reads retry on the next member by themselves.
        assert (await store.list("/w/")).items == ()
        assert store.endpoint.port == cluster.members[1].port
        created = await store.create("/w/a", {"n": 1})
        assert (await store.get("/w/a")).revision == created.revision
    finally:
        await store.close()


async def test_when_the_member_in_use_dies_reads_and_writes_go_on_through_another(
    cluster: LocalEtcdCluster,
) -> None:
    store = await _connect(cluster.endpoints)
    try:
        created = await store.create("/w/a", {"n": 1})
        dead = _member_in_use(cluster, store)
        await asyncio.to_thread(cluster.members[dead].kill)

        assert (await store.get("/w/a")).value == {"n": 1}
        assert store.endpoint.port != cluster.members[dead].port
        updated = await store.update("/w/a", {"n": 2}, expected=created.revision)
        assert updated.revision > created.revision
    finally:
        await store.close()


async def test_a_write_that_meets_a_dead_member_is_reported_and_the_next_one_succeeds(
    cluster: LocalEtcdCluster,
) -> None:
    store = await _connect(cluster.endpoints)
    try:
        await store.create("/w/a", {})
        await asyncio.to_thread(cluster.members[_member_in_use(cluster, store)].kill)

        # Its outcome is unknown to the store (etcd may have committed it), so it is not
        # repeated behind the caller's back.
        with pytest.raises(Unavailable):
            await store.create("/w/b", {})
        await store.create("/w/c", {})
        assert [o.key for o in (await store.list("/w/")).items] == ["/w/a", "/w/c"]
    finally:
        await store.close()


async def test_a_watch_reopened_after_its_member_died_misses_no_event(
    cluster: LocalEtcdCluster,
) -> None:
    store = await _connect(cluster.endpoints)
    writer = await _connect(cluster.endpoints, root=store._root)
    try:
        start = await store.current_revision()
        seen: list[str] = []
        position = Revision(start)
        async with store.watch("/w/", since=start) as events:
            await writer.create("/w/a", {})
            async with asyncio.timeout(5):
                event = await anext(events)
            seen.append(event.key)
            position = event.revision

            dead = _member_in_use(cluster, store)
            if writer.endpoint == store.endpoint:  # keep the writer on a living member
                writer._endpoints.fail_over(writer._client, Unavailable("test"))
            await asyncio.to_thread(cluster.members[dead].kill)
            await writer.create("/w/b", {})

            with pytest.raises(Unavailable):
                async with asyncio.timeout(10):
                    while True:
                        event = await anext(events)
                        seen.append(event.key)
                        position = event.revision
        await writer.create("/w/c", {})
        async with store.watch("/w/", since=position) as events:
            async with asyncio.timeout(5):
                while seen[-1] != "/w/c":
                    seen.append((await anext(events)).key)
        assert seen == ["/w/a", "/w/b", "/w/c"]
    finally:
        await store.close()
        await writer.close()


async def test_a_leader_keeps_its_leadership_when_the_member_it_talks_to_dies(
    cluster: LocalEtcdCluster,
) -> None:
    store = await _connect(cluster.endpoints)
    try:
        election = EtcdElection(store, "hub", ttl=TTL)
        leadership = await asyncio.wait_for(election.campaign("hub-a"), 5)
        await asyncio.to_thread(cluster.members[_member_in_use(cluster, store)].kill)

        await asyncio.sleep(TTL * 2.5)
        assert not leadership.lost.is_set()
        assert await election.leader() == "hub-a"
        view = store.fenced(leadership)
        await view.create("/w/by-leader", {})
        await election.resign()
    finally:
        await store.close()


async def test_election_keys_are_not_among_the_stores_objects(
    cluster: LocalEtcdCluster,
) -> None:
    store = await _connect(cluster.endpoints)
    try:
        start = await store.current_revision()
        election = EtcdElection(store, "hub", ttl=TTL)
        await election.campaign("hub-a")
        await store.create("/w/a", {})
        assert [o.key for o in (await store.list("")).items] == ["/w/a"]
        async with store.watch("", since=start) as events, asyncio.timeout(5):
            assert (await anext(events)).key == "/w/a"
        await election.resign()
    finally:
        await store.close()


@pytest.mark.parametrize("scheme", ["etcd://", "etcd:"])
async def test_the_hubs_store_flag_names_every_endpoint_in_either_spelling(
    cluster: LocalEtcdCluster, scheme: str
) -> None:
    store = await open_store(f"{scheme}{cluster.endpoints}")
    try:
        assert isinstance(store, EtcdStore)
        assert store._endpoints.endpoints == parse_endpoints(cluster.endpoints)
        assert (await store.list("/nothing/")).items == ()
    finally:
        await store.close()
