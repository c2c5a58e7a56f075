"""When no cluster has room, a workload whose cluster queue takes back lent quota
(`reclaimWithinCohort: Any`, in a cohort) is offered to one cluster where its queue's unused
nominal quota is borrowed by others, and that cluster's agent preempts the borrowers; the room
stays booked while the agent queues it, so the same lent quota is not offered twice, and
work beyond what was lent waits at the hub. Before, with two clusters full, it waited at the
hub until something finished and nothing was ever preempted for it."""

from __future__ import annotations

from typing import Any

from api.v1alpha1.messages import CapacityReport, DispatchOffer, WorkloadPhase
from tests.hub.service.conftest import HubUnderTest, ScriptedAgent
from tests.hub.service.test_dispatch_flow import capacity, report, submit, two_clusters
from tests.hub.service.test_freed_room import no_offer

API = "/apis/multiq.dev/v1alpha1"


def lent(cluster: str, used_cpu: str) -> CapacityReport:
    """Nothing free (the cohort's borrowers took it), `used_cpu` of 8 nominal used."""
    return capacity(cluster, "0", used_cpu)


async def reclaiming(hub: HubUnderTest, policy: str) -> None:
    def join_research(cq: dict[str, Any]) -> None:
        cq["spec"]["cohortName"] = "research"
        cq["spec"]["preemption"] = {"reclaimWithinCohort": policy}

    status, body = await hub.edit(f"{API}/clusterqueues/team-vision", join_research)
    assert status == 200, body


async def offered(agent: ScriptedAgent, key: str) -> DispatchOffer:
    offer: DispatchOffer = await agent.expect(DispatchOffer)
    assert offer.workload.key() == key
    return offer


async def queue_it(agent: ScriptedAgent, offer: DispatchOffer) -> None:
    key = offer.workload.key()
    await agent.send(report(key, offer.generation, WorkloadPhase.PENDING))


async def test_lent_quota_is_taken_back_in_one_cluster_and_booked_while_it_preempts(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="0", west_cpu="0")
    await reclaiming(hub, "Any")
    await east.send(lent("east", "6"))  # 2 CPUs lent
    await west.send(lent("west", "4"))  # 4 CPUs lent
    first = await submit(hub, "first")  # 2 CPUs (two pods of 1)
    offer = await offered(west, first)  # the most left to take back after it
    assert offer.bound
    await queue_it(west, offer)
    second = await submit(hub, "second")
    await queue_it(east, await offered(east, second))  # west's 2 left tie east's: by name
    third = await submit(hub, "third")
    await queue_it(west, await offered(west, third))
    await submit(hub, "fourth")
    await no_offer(east)
    await no_offer(west, within=0.5)  # all the lent quota is spoken for: it waits
    await east.close()
    await west.close()


async def test_a_queue_that_does_not_take_back_from_any_borrower_waits_at_the_hub(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="0", west_cpu="0")
    await reclaiming(hub, "LowerPriority")  # the hub cannot tell the borrowers' priorities
    await east.send(lent("east", "0"))
    await west.send(lent("west", "0"))
    key = await submit(hub, "first")
    await no_offer(west)
    await no_offer(east, within=0.2)
    _, wl = await hub.call("GET", f"{API}/namespaces/vision/workloads/{key.split('/')[1]}")
    conditions: dict[str, Any] = {c["type"]: c for c in wl["status"]["conditions"]}
    assert "InsufficientHeadroom" in conditions["QuotaReserved"]["message"]
    await east.close()
    await west.close()
