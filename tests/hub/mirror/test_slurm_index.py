"""The hub's index of Slurm-mode workloads follows the mirror: what it finds, and what it
lets go of."""

from __future__ import annotations

import asyncio
from pathlib import Path

from api.slurm.work import SlurmAnnotations
from hub.slurm_index import SlurmIndex
from hub.state import HubState
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_hub_state import _workload, eventually


def _slurm_job(name: str, job_id: int) -> dict[str, object]:
    wl = _workload(name)
    wl["metadata"]["annotations"] = {SlurmAnnotations.JOB_ID: str(job_id)}
    return wl


async def _follow(state: HubState) -> asyncio.Task[None]:
    state.synced.clear()
    task = asyncio.create_task(state.run())
    await state.synced.wait()
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_slurm_job_written_or_deleted_is_indexed_or_dropped(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    state = HubState(store)
    following = await _follow(state)
    index = SlurmIndex(state)
    try:
        await store.create("/workloads/team/a", _slurm_job("a", 7))
        await eventually(lambda: index.key_of_job(7) == "team/a")

        await store.delete("/workloads/team/a", expected=None)
        await eventually(lambda: "team/a" not in state.workloads)
        assert index.key_of_job(7) is None
        assert "team/a" not in index.facts
    finally:
        await _stop(following)
        await store.close()


async def test_a_slurm_job_gone_when_the_mirror_relists_leaves_the_index(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    await store.create("/workloads/team/a", _slurm_job("a", 7))
    await store.create("/workloads/team/b", _slurm_job("b", 8))
    state = HubState(store)
    index = SlurmIndex(state)
    following = await _follow(state)
    assert index.key_of_job(7) == "team/a"
    await _stop(following)
    # Deleted while the mirror was not following: only the next listing shows it gone.
    await store.delete("/workloads/team/a", expected=None)
    following = await _follow(state)
    try:
        assert index.key_of_job(7) is None
        assert "team/a" not in index.facts
        assert index.key_of_job(8) == "team/b"
    finally:
        await _stop(following)
        await store.close()
