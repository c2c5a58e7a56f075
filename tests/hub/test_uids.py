"""The uids the hub gives the objects it creates (hub.objects.RandomUids): RFC 4122 version 4
UUIDs in their canonical text, unique, drawn from a pool that a forked child never shares;
and the random suffix of a generateName, drawn from the same pool."""

from __future__ import annotations

import os
import re
import uuid

import pytest

from api.v1alpha1.queues import ClusterQueue
from hub.objects import ObjectRepository, RandomUids
from hub.store.sqlite import SqliteStore


def test_a_uid_is_a_random_uuid_in_its_canonical_text() -> None:
    uids = RandomUids()
    for _ in range(2 * RandomUids.BATCH + 3):  # across refills of the pool
        text = uids()
        parsed = uuid.UUID(text)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == text


def test_no_two_uids_are_alike_across_refills_of_the_pool() -> None:
    uids = RandomUids()
    drawn = [uids() for _ in range(10 * RandomUids.BATCH)]
    assert len(set(drawn)) == len(drawn)


def test_the_pool_is_refilled_once_per_batch_of_uids(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    real = os.urandom

    def counting(n: int) -> bytes:
        reads.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", counting)
    uids = RandomUids()
    for _ in range(RandomUids.BATCH + 1):
        uids()
    assert reads == [16 * RandomUids.BATCH, 16 * RandomUids.BATCH]


def test_a_forked_child_draws_other_uids_than_its_parent() -> None:
    uids = RandomUids()
    uids()  # the pool holds the next BATCH - 1 uids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next uids, to the parent
        os.close(read)
        os.write(write, ",".join(uids() for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [uids() for _ in range(4)]
    assert len(child) == 4
    assert not set(child) & set(parent)


async def test_an_object_created_with_a_generate_name_gets_five_random_hex_characters_after_it(
    sqlite_store: SqliteStore,
) -> None:
    repo = ObjectRepository(sqlite_store)
    names = []
    for _ in range(3):
        cq = ClusterQueue.model_validate({"metadata": {"generateName": "cq-"}, "spec": {}})
        names.append((await repo.create(cq))["metadata"]["name"])
    assert all(re.fullmatch(r"cq-[0-9a-f]{5}", name) for name in names), names
    assert len(set(names)) == 3
