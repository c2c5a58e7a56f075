"""Parking changes no decision: a dispatcher that parks the workloads held back alike (fit
nowhere, or over their fleet quota) offers the same workloads to the same clusters, cycle by
cycle, as one that looks at every workload in every cycle, over random runs of submissions,
capacity reports, answers to offers and finished work."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest

from api.quantity import Quantity
from api.v1alpha1.federation import GlobalQueue
from api.v1alpha1.messages import (
    CapacityReport,
    DispatchOffer,
    Envelope,
    OfferRejected,
    Payload,
    RejectReason,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission
from hub.answers import AgentAnswers
from hub.auth import TokenAuthority
from hub.dispatch import WAITING_REFRESH_SECONDS, Dispatcher
from hub.fleet import ClusterState, Fleet
from hub.lanes import Lane
from hub.objects import ObjectRepository
from hub.placement.cycle import CycleSettings
from hub.state import HubState
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.test_fleet_usage import _config, _workload_of
from tests.hub.mirror.test_hub_state import eventually

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CLUSTERS = ("east", "west")
QUEUES = {"q": "cq-q", "other": "cq-other"}  # local queue → cluster queue (see `_config`)


class RecordingLane:
    """An agent's control lane that keeps what the hub sends."""

    closed = False

    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(
        self, payload: Payload, *, trace_context: object = None, encoded: object = None
    ) -> None:
        if encoded is not None:
            # What the agent would decode from the members the hub encoded from its stored
            # forms is what it would decode from the payload's models.
            envelope = Envelope.wrap(payload, seq=1)
            assert isinstance(encoded, Mapping)
            assert Envelope.decode(envelope.to_json(encoded)) == Envelope.decode(envelope.to_json())
        self.sent.append(payload)


@dataclass
class World:
    store: SqliteStore
    state: HubState
    dispatcher: Dispatcher
    answers: AgentAnswers
    lanes: dict[str, RecordingLane]
    task: asyncio.Task[None]

    async def settle(self) -> None:
        """Wait until the mirror holds every write made so far."""
        revision = await self.store.current_revision()
        await eventually(lambda: self.state.revision >= revision)

    def offers_sent(self) -> list[tuple[str, str, int]]:
        """(workload, cluster, generation) of the offers sent since the last call."""
        out = []
        for cluster, lane in self.lanes.items():
            for payload in lane.sent:
                if isinstance(payload, DispatchOffer):
                    out.append((payload.workload.key(), cluster, payload.generation))
            lane.sent.clear()
        return sorted(out)

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.store.close()


async def open_world(path: Path, *, parking: bool, fleet_cpu: str) -> World:
    store = await SqliteStore.open(path)
    state = HubState(store)
    task = asyncio.create_task(state.run())
    await state.synced.wait()
    repo = ObjectRepository(store)
    for doc in _config(fleet_cpu, queues=list(QUEUES)):
        await repo.create(repo.validate(doc))
    await eventually(lambda: state.find(GlobalQueue, "capped") is not None)
    fleet = Fleet(repo, TokenAuthority(), secrets_dir=None)
    lanes = {name: RecordingLane() for name in CLUSTERS}
    fleet.clusters = {
        name: ClusterState(name, control=cast(Lane, lane)) for name, lane in lanes.items()
    }
    # Without parking every workload is looked at in every cycle (the memo of a cycle's
    # failed shapes, which parking builds on, stays).
    settings = CycleSettings(waiting_refresh_seconds=WAITING_REFRESH_SECONDS, parking=parking)
    dispatcher = Dispatcher(state, fleet, clock=lambda: NOW, settings=settings)
    return World(store, state, dispatcher, AgentAnswers(dispatcher), lanes, task)


def _capacity(world: World, cluster: str, free: dict[str, int]) -> None:
    """A capacity report: `free` milli-CPU per cluster queue, of 8 CPUs each."""
    state = world.dispatcher.fleet.clusters[cluster]
    state.cells = {(cq, "default"): ({"cpu": free[cq]}, {"cpu": 8000}) for cq in QUEUES.values()}
    world.answers.on_capacity(cluster, CapacityReport(cluster=cluster, observed_at=NOW))


async def _grow_fleet_quota(world: World, *, cpu: str) -> None:
    gq = world.state.find(GlobalQueue, "capped")
    assert isinstance(gq, GlobalQueue)
    changed = gq.model_copy(deep=True)
    changed.spec.fleet_quota = {"cpu": Quantity.parse(cpu)}
    await ObjectRepository(world.store).replace(changed)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
async def test_parking_offers_what_looking_at_every_workload_every_cycle_offers(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    parked = await open_world(tmp_path / "parked.db", parking=True, fleet_cpu="6")
    plain = await open_world(tmp_path / "plain.db", parking=False, fleet_cpu="6")
    worlds = (parked, plain)
    open_offers: dict[str, tuple[str, int]] = {}  # workload → (cluster, generation)
    bound: dict[str, tuple[str, int]] = {}
    queue_of: dict[str, str] = {}
    offered_in_all = 0
    try:
        for world in worlds:
            for cluster in CLUSTERS:
                _capacity(world, cluster, {"cq-q": 4000, "cq-other": 4000})
        for step in range(200):
            roll = rng.random()
            actions: list[Any] = []
            if step % 50 == 49:
                # The configuration moves: the fleet quota grows.
                actions.append(partial(_grow_fleet_quota, cpu=str(8 + step // 50 * 2)))
            elif roll < 0.4:
                name = f"w{step}"
                queue = rng.choice(list(QUEUES))
                cpu = rng.choice(["1", "2", "3", "5", "9"])  # 9 CPUs fit no cluster queue

                queue_of[f"team/{name}"] = queue

                async def submit(
                    world: World, name: str = name, q: str = queue, c: str = cpu
                ) -> None:
                    wl = _workload_of(name, queue=q, cpu=c, status={})
                    await world.store.create(f"/workloads/team/{name}", wl)

                actions.append(submit)
            elif roll < 0.55:
                cluster = rng.choice(CLUSTERS)
                free = {cq: rng.choice([0, 1000, 2000, 4000, 8000]) for cq in QUEUES.values()}

                async def report_capacity(
                    world: World, c: str = cluster, f: dict[str, int] = free
                ) -> None:
                    _capacity(world, c, f)

                actions.append(report_capacity)
            elif roll < 0.8 and open_offers:
                key = rng.choice(sorted(open_offers))
                cluster, generation = open_offers.pop(key)
                if rng.random() < 0.7:
                    bound[key] = (cluster, generation)
                    admitted = WorkloadStatusReport(
                        workload=key,
                        generation=generation,
                        phase=WorkloadPhase.ADMITTED,
                        admission=Admission(cluster_queue=QUEUES[queue_of[key]]),
                    )

                    async def admit(
                        world: World, c: str = cluster, r: WorkloadStatusReport = admitted
                    ) -> None:
                        await world.answers.on_status(c, r)

                    actions.append(admit)
                else:
                    rejected = OfferRejected(
                        workload=key,
                        generation=generation,
                        reason=RejectReason.INADMISSIBLE,
                        message="no room",
                    )

                    async def reject(
                        world: World, c: str = cluster, r: OfferRejected = rejected
                    ) -> None:
                        await world.answers.on_rejected(c, r)

                    actions.append(reject)
            elif bound:
                key = rng.choice(sorted(bound))
                cluster, generation = bound.pop(key)
                done = WorkloadStatusReport(
                    workload=key, generation=generation, phase=WorkloadPhase.SUCCEEDED
                )

                async def finish(
                    world: World, c: str = cluster, r: WorkloadStatusReport = done
                ) -> None:
                    await world.answers.on_status(c, r)

                actions.append(finish)
            sent = []
            for world in worlds:
                for action in actions:
                    await action(world)
                await world.settle()
                await world.dispatcher.cycle()
                await world.settle()
                sent.append(world.offers_sent())
            assert sent[0] == sent[1], f"step {step}: parking offered {sent[0]}, not {sent[1]}"
            for key, cluster, generation in sent[0]:
                open_offers[key] = (cluster, generation)
                offered_in_all += 1
        # The run exercised what it is about: offers were made, and workloads were parked.
        assert offered_in_all >= 10
        assert parked.dispatcher.book.groups
    finally:
        for world in worlds:
            await world.close()
