"""The floor hub's `--validate`: what any hub must do with a submission — the Job checked with
the api models and converted to the Workload it queues; bad input refused by its fields. And
the floor agents' `--required` admission: offers admitted by MultiQ's engine, within quota. And
the floor hub's `--commit-interval`: writes that trickle in among concurrent writers are
committed together, a lone writer at once."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from api.errors import ObjectInvalidError
from api.v1alpha1.workload import Workload
from bench.control_plane_floor import FloorAdmission, GroupCommit, _open_db, validated
from bench.federation_dispatch import small_job


def test_a_good_job_becomes_the_workload_the_hub_would_queue() -> None:
    stored = validated(small_job("ok")).to_wire()
    assert stored["kind"] == "Workload"
    assert stored["metadata"]["namespace"] == "default"
    [pod_set] = stored["spec"]["podSets"]
    assert pod_set["count"] == 1
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


def test_a_bad_job_is_refused_with_every_field_it_broke() -> None:
    bad = small_job("Bad_Name")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    with pytest.raises(ObjectInvalidError) as refused:
        validated(bad)
    paths = [error.path for error in refused.value.errors]
    assert "metadata.name" in paths
    assert any(path.endswith("resources.requests[cpu]") for path in paths), paths


def offered(name: str, cpu: str = "100m") -> Workload:
    job = small_job(name)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return validated(job)


def test_the_required_floor_admits_offers_through_the_engine_within_the_queues_quota() -> None:
    # One 8-CPU node: the dev ClusterQueue's nominal quota is 8 CPUs.
    admission = FloorAdmission(nodes=1)
    first = admission.offer(offered("a", "5"), now=1.0)
    second = admission.offer(offered("b", "5"), now=1.0)
    [admit] = admission.cycle(now=1.0)
    assert admit.workload == first
    assert admit.admission.cluster_queue == "default"
    assert admission.cycle(now=2.0) == []  # the second does not fit beside the first
    third = admission.offer(offered("c", "3"), now=3.0)
    assert [a.workload for a in admission.cycle(now=3.0)] == [third]
    assert second not in {a.workload for a in admission.cycle(now=4.0)}


class _Counting:
    """An in-memory floor database whose commits are counted."""

    def __init__(self) -> None:
        self._conn = _open_db(Path(":memory:"), "FULL")
        self.commits = 0
        self._keys = itertools.count()

    def execute(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def commit(self) -> None:
        self.commits += 1
        self._conn.commit()

    async def commits_of(self, group: GroupCommit, spaced: list[float]) -> int:
        """How many commits `group` (over this database) makes of writes that come `spaced`
        seconds apart, awaited together."""

        async def write(delay: float) -> None:
            await asyncio.sleep(delay)
            key = f"k{next(self._keys)}"
            await group.write("INSERT INTO objects (value, key) VALUES (?, ?)", ("{}", key))

        before = self.commits
        await asyncio.gather(*(write(d) for d in spaced))
        return self.commits - before


def _group(db: _Counting, commit_interval: float = 0.0) -> GroupCommit:
    return GroupCommit(cast(sqlite3.Connection, db), commit_interval)


async def test_the_floor_hubs_commit_interval_gathers_writes_that_trickle_in_together() -> None:
    db = _Counting()
    gathered = _group(db, commit_interval=1.0)
    # Two at once, then three trickling in within the second after that commit began.
    assert await db.commits_of(gathered, [0, 0]) == 1
    assert await db.commits_of(gathered, [0, 0.05, 0.1]) == 1
    at_once = _Counting()
    assert await at_once.commits_of(_group(at_once), [0, 0.05, 0.1]) == 3


async def test_the_floor_hubs_commit_interval_never_holds_back_a_lone_writer() -> None:
    db = _Counting()
    group = _group(db, commit_interval=30.0)
    started = asyncio.get_running_loop().time()
    for _ in range(3):
        assert await db.commits_of(group, [0]) == 1
    # One held back would have waited 30 s.
    assert asyncio.get_running_loop().time() - started < 15
