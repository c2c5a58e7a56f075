"""The hub's in-memory mirror of its store: what it holds, and how cheaply it follows writes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hub import transitions
from hub.state import HubState
from hub.store.base import Revision
from hub.store.sqlite import SqliteStore


def _workload(
    name: str, *, status: dict[str, Any] | None = None, active: bool = True
) -> dict[str, Any]:
    wl: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "queueName": "q",
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }
    if status is not None:
        wl["status"] = status
    return wl


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
FINISHED = {
    "conditions": [
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "",
            "lastTransitionTime": "2026-12-02T12:00:00Z",
        }
    ]
}


async def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if check():
                return
            await asyncio.sleep(0.01)


async def test_pending_holds_only_workloads_still_waiting_for_a_cluster(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await store.create("/workloads/team/new", _workload("new"))
    await store.create("/workloads/team/bound", _workload("bound", status={"clusterName": "east"}))
    await store.create("/workloads/team/done", _workload("done", status=FINISHED))
    await store.create("/workloads/team/off", _workload("off", active=False))
    await eventually(lambda: len(state.workloads) == 4)
    assert state.pending == {"team/new"}

    entry = state.workloads["team/new"]
    wire = dict(entry.raw)
    wire["status"] = {"clusterName": "west"}
    await store.update("/workloads/team/new", wire, expected=entry.revision)
    await eventually(lambda: state.workloads["team/new"].revision > entry.revision)
    assert state.pending == set()


async def test_a_status_change_keeps_the_parsed_spec(mirror: tuple[SqliteStore, HubState]) -> None:
    store, state = mirror
    await store.create("/workloads/team/a", _workload("a"))
    await eventually(lambda: "team/a" in state.workloads)
    before = state.workloads["team/a"]
    wire = dict(before.raw)
    wire["status"] = {"dispatchGeneration": 1, "nominatedClusterNames": ["east"]}
    await store.update("/workloads/team/a", wire, expected=before.revision)
    await eventually(lambda: state.workloads["team/a"].revision > before.revision)

    after = state.workloads["team/a"].workload
    assert after.spec is before.workload.spec
    assert after.status is not None and after.status.nominated_cluster_names == ["east"]
    assert after.metadata.resource_version == str(state.workloads["team/a"].revision)


async def test_the_hubs_own_write_is_mirrored_before_its_event_and_not_undone_by_an_older_one(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    await store.create("/workloads/team/a", _workload("a"))
    await eventually(lambda: "team/a" in state.workloads)
    entry = state.workloads["team/a"]
    changed = transitions.mark_offered(transitions.for_change(entry.workload), ["east"], 1, NOW)
    assert entry.workload.status is None  # the mirrored workload itself is untouched
    wire = {**entry.raw, "status": changed.status.to_wire() if changed.status else {}}
    state.expect("team/a", changed, wire)
    stored = await store.update("/workloads/team/a", wire, expected=entry.revision)
    held = state.remember("team/a", changed, stored.revision, wire)

    assert state.workloads["team/a"].revision == stored.revision
    assert held.metadata.resource_version == str(stored.revision)
    # The writer's copy shares its metadata with the workload it changed: stamping the new
    # resourceVersion on it leaves the one mirrored before as it was.
    assert entry.workload.metadata.resource_version == str(entry.revision)
    # A stale copy arriving later (an older revision) does not replace the newer one.
    state.remember("team/a", entry.workload, Revision(entry.revision), entry.raw)
    assert state.workloads["team/a"].workload.status is not None


async def test_the_configuration_generation_moves_with_definitions_not_with_status(
    mirror: tuple[SqliteStore, HubState],
) -> None:
    store, state = mirror
    member: dict[str, Any] = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": "east", "labels": {"region": "eu"}},
        "spec": {"tokenRef": {"secretName": "agent-token-east"}},
    }
    stored = await store.create("/memberclusters/east", member)
    await eventually(lambda: "east" in state.config.get("memberclusters", {}))
    added = state.config_generation

    # A heartbeat: only status changes, and what was derived from the configuration holds.
    member["status"] = {"connected": True}
    stored = await store.update("/memberclusters/east", member, expected=stored.revision)
    await eventually(lambda: state.revision >= stored.revision)
    assert state.config_generation == added

    member["metadata"]["labels"] = {"region": "us"}
    stored = await store.update("/memberclusters/east", member, expected=stored.revision)
    await eventually(lambda: state.revision >= stored.revision)
    assert state.config_generation == added + 1
