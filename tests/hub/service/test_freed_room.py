"""Room a finished workload gives back is offered again at once: the hub counts it free from
the Succeeded or Failed report until a capacity report observed no earlier shows it, so a
cluster of short jobs is refilled without waiting for the agent's next capacity report
(which the agent paces). A redelivered finish is not counted twice, and a capacity report
observed before the finish does not undo it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from api.quantity import Quantity
from api.v1alpha1.messages import DispatchOffer, HeldWorkload, WorkloadPhase
from api.v1alpha1.workload import Admission, PodSetAssignment
from tests.hub.service.conftest import HubUnderTest, ScriptedAgent
from tests.hub.service.test_dispatch_flow import capacity, report, submit, two_clusters


def admission(cpu: str = "2", memory: str = "4Gi") -> Admission:
    """What an agent reports of a one-pod-set workload admitted in team-vision."""
    return Admission(
        cluster_queue="team-vision",
        pod_set_assignments=[
            PodSetAssignment(
                name="main",
                flavors={"cpu": "default", "memory": "default"},
                resource_usage={"cpu": Quantity.parse(cpu), "memory": Quantity.parse(memory)},
                count=1,
            )
        ],
    )


async def run_one(west: ScriptedAgent, hub: HubUnderTest, name: str) -> str:
    key = await submit(hub, name)  # 2 CPUs
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == key
    await west.send(report(key, 1, WorkloadPhase.ADMITTED, admission=admission()))
    return key


async def no_offer(agent: ScriptedAgent, within: float = 1.0) -> None:
    try:
        offer = await agent.expect(DispatchOffer, within=within)
    except TimeoutError:
        return
    raise AssertionError(f"offered {offer.workload.key()}")


async def test_a_finished_workloads_room_is_offered_before_the_next_capacity_report(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="0", west_cpu="2")
    first = await run_one(west, hub, "first")
    await west.send(capacity("west", "0"))  # the agent shows the room taken
    second = await submit(hub, "second")
    await no_offer(west)  # no room anywhere: it waits

    await west.send(
        report(first, 1, WorkloadPhase.SUCCEEDED, observed_at=datetime.now(UTC) + timedelta(0, 1))
    )
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == second
    await east.close()
    await west.close()


async def test_a_redelivered_finish_and_an_older_capacity_report_count_the_room_once(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="0", west_cpu="2")
    first = await run_one(west, hub, "first")
    await west.send(capacity("west", "0"))
    finished_at = datetime.now(UTC) + timedelta(0, 1)
    older_report = capacity("west", "0")  # observed before the finish: shows it running
    await west.send(report(first, 1, WorkloadPhase.SUCCEEDED, observed_at=finished_at))
    await west.send(report(first, 1, WorkloadPhase.SUCCEEDED, observed_at=finished_at))
    await asyncio.sleep(0.2)
    await west.send(older_report)
    second, third = await submit(hub, "second"), await submit(hub, "third")
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == second
    await no_offer(west)  # 2 CPUs were freed, once: the third waits

    # A report observed after the finish shows the room itself (taken by the second now).
    await west.send(report(second, 1, WorkloadPhase.ADMITTED, admission=admission()))
    later = capacity("west", "0")
    later.observed_at = finished_at + timedelta(0, 1)
    await west.send(later)
    await no_offer(west)
    assert hub.hub.fleet.clusters["west"].freed == []
    assert third  # still waiting
    await east.close()
    await west.close()


async def test_a_capacity_report_sent_right_after_an_answer_frees_that_offers_booking(
    hub: HubUnderTest,
) -> None:
    # The agent answers, then reports capacity that already shows the admission. The hub
    # applies each workload's reports in a task of its own, so the capacity report can be
    # handled before the answer's task runs: the answer must count from its arrival, or the
    # booking stays on top of the report that shows it, hiding the room until the next one.
    async def answer(west: ScriptedAgent, first: str) -> None:
        await west.send(report(first, 1, WorkloadPhase.ADMITTED, admission=admission()))
        await west.send(capacity("west", "2", used_cpu="2"))

    await _next_is_offered_once_the_first_is_answered(hub, answer)


async def test_a_capacity_report_listing_a_workload_admitted_unreported_frees_its_booking(
    hub: HubUnderTest,
) -> None:
    # The agent's Admitted report waits for the pods; its capacity report already counts the
    # workload and lists it as admitted. Counted again as booked, the room would stay hidden.
    async def answer(west: ScriptedAgent, first: str) -> None:
        listed = HeldWorkload(workload=first, generation=1, phase=WorkloadPhase.ADMITTED)
        await west.send(
            capacity("west", "2", used_cpu="2").model_copy(update={"admitted": [listed]})
        )

    await _next_is_offered_once_the_first_is_answered(hub, answer)


async def _next_is_offered_once_the_first_is_answered(
    hub: HubUnderTest, answer: Callable[[ScriptedAgent, str], Awaitable[None]]
) -> None:
    """West (4 CPUs; east has none) is offered a first 2-CPU workload and `answer`s it so that
    it shows 2 CPUs used: a second one is offered there at once, the booking gone."""
    east, west = await two_clusters(hub, east_cpu="0", west_cpu="4")
    first = await submit(hub, "first")  # 2 CPUs
    assert (await west.expect(DispatchOffer)).workload.key() == first
    await answer(west, first)
    second = await submit(hub, "second")
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == second
    await east.close()
    await west.close()
