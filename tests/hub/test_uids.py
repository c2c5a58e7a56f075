"""The uids the hub gives the objects it creates (hub.objects.RandomUids): RFC 4122 version 4
UUIDs in their canonical text, unique, drawn from a pool that a forked child never shares."""

from __future__ import annotations

import os
import uuid

import pytest

from hub.objects import RandomUids


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
