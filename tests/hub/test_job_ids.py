"""Slurm job ids from blocks reserved in the store (hub.slurm.JobIds): every id handed out is
above every id handed out before it, within a term, across terms and across restarts; no id is
handed out twice, however submissions interleave; and a run of submissions pays one counter
write per block, not one per job."""

from __future__ import annotations

import asyncio
import random

import pytest

from hub.slurm import JOB_ID_KEY, JobIds
from hub.store.sqlite import SqliteStore


@pytest.fixture
def store(sqlite_store: SqliteStore) -> SqliteStore:
    return sqlite_store


class Term:
    """Stands for the hub's leadership term: a new object per term, as LeaderWork's."""


async def test_ids_count_up_and_a_request_too_big_for_the_block_stays_in_order(
    store: SqliteStore,
) -> None:
    ids = JobIds(store, lambda: None, block=10)
    assert [await ids.take(1), await ids.take(3), await ids.take(1)] == [1, 2, 5]
    big = await ids.take(50)  # does not fit what is left of the block
    assert big > 5
    after = await ids.take(1)
    assert after >= big + 50


async def test_a_run_of_submissions_writes_the_counter_once_per_block(
    store: SqliteStore,
) -> None:
    ids = JobIds(store, lambda: None, block=100)
    await ids.take(1)
    revision = (await store.get(JOB_ID_KEY)).revision
    taken = [await ids.take(1) for _ in range(50)]
    assert taken == list(range(2, 52))
    assert (await store.get(JOB_ID_KEY)).revision == revision


async def test_a_new_term_and_a_restart_continue_above_every_id_handed_out(
    store: SqliteStore,
) -> None:
    term = Term()
    leader = JobIds(store, lambda: term, block=10)
    handed = [await leader.take(1) for _ in range(3)]
    other_term = Term()
    other_hub = JobIds(store, lambda: other_term, block=10)  # led meanwhile, on the same store
    handed.append(await other_hub.take(2))
    term = Term()  # this hub leads again: what was left of its block is not used
    handed.append(await leader.take(1))
    restarted = JobIds(store, lambda: None, block=10)
    handed.append(await restarted.take(1))
    assert handed == sorted(handed)
    assert len(set(handed)) == len(handed)


async def test_interleaved_submissions_never_share_an_id(store: SqliteStore) -> None:
    ids = JobIds(store, lambda: None, block=7)
    rng = random.Random(19)
    counts = [rng.choice((1, 1, 2, 5, 9, 30)) for _ in range(200)]
    firsts = await asyncio.gather(*(ids.take(n) for n in counts))
    handed = [i for first, n in zip(firsts, counts, strict=True) for i in range(first, first + n)]
    assert len(set(handed)) == len(handed) == sum(counts)
    assert int((await store.get(JOB_ID_KEY)).value["next"]) > max(handed)
