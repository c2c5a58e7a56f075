"""The hub's own read-modify-writes (status it computes) are checked against the kind's model
before they are stored: a field the model lacks is refused, loudly, and nothing is written,
because a stored object its model refuses is unreadable to every later read, the hub's
mirrors included (session 13's `schedulableNodes` fault stopped all dispatch that way)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from api.v1alpha1.federation import MemberCluster
from hub.errors import UnreadableWriteError
from hub.objects import ObjectRepository
from hub.store.sqlite import SqliteStore


def member() -> MemberCluster:
    return MemberCluster.model_validate(
        {"metadata": {"name": "east"}, "spec": {"tokenRef": {"secretName": "t"}}}
    )


async def test_a_status_write_the_model_refuses_stores_nothing_and_logs_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    try:
        repo = ObjectRepository(store)
        created = await repo.create(member())

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            value["status"] = {"capacity": {"noSuchField": 3}}
            return value

        with caplog.at_level(logging.ERROR), pytest.raises(UnreadableWriteError) as raised:
            await repo.modify(MemberCluster, "east", None, mutate)
        assert "MemberCluster east" in str(raised.value)
        assert "noSuchField" in str(raised.value)
        assert any("refusing to write MemberCluster east" in r.message for r in caplog.records)
        read = await repo.get_wire(MemberCluster, "east", None)
        assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert "status" not in read
        await repo.get(MemberCluster, "east")  # still readable
    finally:
        await store.close()


async def test_a_status_write_the_model_accepts_is_stored(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "hub.db")
    try:
        repo = ObjectRepository(store)
        await repo.create(member())

        def mutate(value: dict[str, Any]) -> dict[str, Any]:
            value["status"] = {"agentVersion": "0.1.0"}
            return value

        await repo.modify(MemberCluster, "east", None, mutate)
        read = await repo.get(MemberCluster, "east")
        assert read.status is not None and read.status.agent_version == "0.1.0"
    finally:
        await store.close()
