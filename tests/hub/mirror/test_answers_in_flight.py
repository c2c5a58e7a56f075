"""An agent's answer to an offer closes the offer only once the answer is written: until then
the mirror still shows the workload unbound, and the dispatcher must not offer it again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from api.v1alpha1.messages import (
    CapacityReport,
    HeldWorkload,
    OfferRejected,
    RejectReason,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission
from hub import transitions
from hub.answers import AgentAnswers
from hub.dispatch import Dispatcher
from hub.placement.book import Assumed
from hub.placement.cycle import OfferDecision, candidate_keys
from hub.placement.snapshot import ClusterName
from hub.store.base import Revision, StoredObject
from hub.store.sqlite import SqliteStore
from tests.hub.mirror.conftest import KEY

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class HeldWrites:
    """Holds every store update until released, so a test can look while one is in flight."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.original = store.update
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def update(self, key: str, value: Any, *, expected: Revision | None) -> StoredObject:
        self.waiting.set()
        await self.release.wait()
        return await self.original(key, value, expected=expected)


@pytest.fixture
async def offered(dispatcher: tuple[SqliteStore, Dispatcher]) -> tuple[SqliteStore, Dispatcher]:
    """A workload offered to cluster east (generation 1), the offer open at the dispatcher."""
    store, d = dispatcher
    offer = partial(transitions.mark_offered, clusters=["east"], generation=1, now=T0)
    assert await d.writer.update_cached(KEY, d.state.workloads[KEY], offer) is not None
    d.book.update(KEY, offers={"east": T0}, mode="AllAtOnce")
    return store, d


def _placeable(dispatcher: Dispatcher) -> list[str]:
    return candidate_keys(dispatcher.snapshot(), T0)


async def _while_written(
    store: SqliteStore, dispatcher: Dispatcher, answer: Callable[[], Coroutine[Any, Any, None]]
) -> list[str]:
    """Run `answer` with its write held; return the keys the dispatcher would place meanwhile."""
    held = HeldWrites(store)
    store.update = held.update  # type: ignore[method-assign]
    answering = asyncio.create_task(answer())
    await held.waiting.wait()
    placeable = _placeable(dispatcher)
    held.release.set()
    await answering
    store.update = held.original  # type: ignore[method-assign]
    return placeable


async def test_a_reservation_being_written_keeps_the_workload_from_being_offered_again(
    offered: tuple[SqliteStore, Dispatcher],
) -> None:
    store, dispatcher = offered
    reserved = WorkloadStatusReport(
        workload=KEY,
        generation=1,
        phase=WorkloadPhase.RESERVED,
        admission=Admission(cluster_queue="q"),
    )
    placeable = await _while_written(
        store, dispatcher, lambda: AgentAnswers(dispatcher).on_status("east", reserved)
    )
    assert placeable == []
    assert KEY not in dispatcher.book.offered  # answered: closed once written
    assert KEY not in _placeable(dispatcher)  # bound to east
    assert (await store.get(f"/workloads/{KEY}")).value["status"]["clusterName"] == "east"


async def test_a_rejection_being_written_keeps_the_workload_back_until_it_is_written(
    offered: tuple[SqliteStore, Dispatcher],
) -> None:
    store, dispatcher = offered
    rejected = OfferRejected(
        workload=KEY, generation=1, reason=RejectReason.INADMISSIBLE, message="no GPUs here"
    )
    placeable = await _while_written(
        store, dispatcher, lambda: AgentAnswers(dispatcher).on_rejected("east", rejected)
    )
    assert placeable == []
    # Written, the offer is closed and the workload may go elsewhere.
    assert _placeable(dispatcher) == [KEY]
    reasons = (await store.get(f"/workloads/{KEY}")).value["status"]["clusterPendingReasons"]
    assert [(r["cluster"], r["reason"]) for r in reasons] == [("east", "Rejected:Inadmissible")]


async def test_a_capacity_report_listing_the_workload_admitted_answers_its_offer(
    offered: tuple[SqliteStore, Dispatcher],
) -> None:
    # The agent's Admitted report waits for the pods; its capacity reports meanwhile count
    # the workload's usage and say so, and the room the offer booked is given back then.
    _, dispatcher = offered
    dispatcher.book.update(KEY, assumed={"east": Assumed("q", "default", {"cpu": 1000})})
    answers = AgentAnswers(dispatcher)

    def capacity(*admitted: HeldWorkload) -> CapacityReport:
        return CapacityReport(cluster="east", observed_at=T0, admitted=list(admitted))

    answers.on_capacity("east", capacity())
    assert dispatcher.book.keys_booking("east") == [KEY]  # not counted there yet
    other = HeldWorkload(workload=KEY, generation=2, phase=WorkloadPhase.ADMITTED)
    answers.on_capacity("east", capacity(other))
    assert dispatcher.book.keys_booking("east") == [KEY]  # another generation's answer
    admitted = HeldWorkload(workload=KEY, generation=1, phase=WorkloadPhase.ADMITTED)
    answers.on_capacity("east", capacity(admitted))
    assert dispatcher.book.keys_booking("east") == []
    assert KEY in dispatcher.book.offered  # still open: the report closes it once written


async def test_a_late_report_of_an_earlier_generation_leaves_the_open_offer_open(
    dispatcher: tuple[SqliteStore, Dispatcher],
) -> None:
    # Generation 2 is offered to east; east's last report of generation 1 comes only now.
    store, d = dispatcher
    offer = partial(transitions.mark_offered, clusters=["east"], generation=2, now=T0)
    assert await d.writer.update_cached(KEY, d.state.workloads[KEY], offer) is not None
    d.book.update(KEY, offers={"east": T0}, mode="AllAtOnce")
    late = WorkloadStatusReport(workload=KEY, generation=1, phase=WorkloadPhase.FAILED)
    await AgentAnswers(d).on_status("east", late)
    # Refused, and no answer to the open offer: east may be reserving generation 2 now.
    assert KEY in d.book.offered
    assert _placeable(d) == []
    status = (await store.get(f"/workloads/{KEY}")).value["status"]
    assert status["dispatchGeneration"] == 2 and status["nominatedClusterNames"] == ["east"]


async def test_an_offer_decided_before_its_workload_changed_is_not_written(
    offered: tuple[SqliteStore, Dispatcher],
) -> None:
    store, dispatcher = offered
    decided_on = dispatcher.state.workloads[KEY].workload
    # Between the decision and its write, east's reservation is bound (the answer's write).
    reserved = WorkloadStatusReport(
        workload=KEY,
        generation=1,
        phase=WorkloadPhase.RESERVED,
        admission=Admission(cluster_queue="q"),
    )
    await AgentAnswers(dispatcher).on_status("east", reserved)
    bound = (await store.get(f"/workloads/{KEY}")).value
    stale = OfferDecision(
        key=KEY,
        workload=decided_on,
        clusters=(ClusterName("west"),),
        generation=2,
        bound=False,
        mode="AllAtOnce",
        booked={"west": Assumed("q", "default", {"cpu": 1000})},
    )
    dispatcher.book.update(KEY, offers={"west": T0}, assumed=stale.booked)
    await dispatcher._commit_offer(stale, T0)
    assert (await store.get(f"/workloads/{KEY}")).value == bound  # bound to east, generation 1
    assert KEY not in dispatcher.book.offered  # the stale offer is closed, its room given back
    assert dispatcher.book.keys_booking("west") == []
