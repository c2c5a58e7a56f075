"""When no cluster has room, a workload whose cluster queue preempts its own lower
priorities (`withinClusterQueue`) is offered to one cluster where lower-priority workloads of
that queue hold enough room — the hub placed them, so its mirror knows them — and that
cluster's engine preempts them; the room stays booked while the agent queues it, so a second
urgent workload goes where lower priorities still hold room, and work of equal or lower
priority waits. Before, it waited at the hub until something finished."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.v1alpha1.messages import DispatchOffer, WorkloadPhase
from tests.hub.service.conftest import ADMIN, HubUnderTest, ScriptedAgent
from tests.hub.service.test_access_matrix import submit_as, workload_body
from tests.hub.service.test_dispatch_flow import capacity, eventually, report, two_clusters
from tests.hub.service.test_freed_room import admission, no_offer

API = "/apis/multiq.dev/v1alpha1"


async def submit(hub: HubUnderTest, name: str, priority: int) -> str:
    body: dict[str, Any] = workload_body(priority)
    body["metadata"]["name"] = name
    status, wl = await submit_as(hub, ADMIN, body)
    assert status == 201, wl
    return f"vision/{name}"


async def offered(agents: tuple[ScriptedAgent, ...], key: str) -> ScriptedAgent:
    """The agent the workload was offered to (the others get nothing)."""
    for agent in agents:
        try:
            offer = await agent.expect(DispatchOffer, within=2.0)
        except TimeoutError:
            continue
        assert offer.workload.key() == key
        return agent
    raise AssertionError(f"{key} offered nowhere")


async def admitted(hub: HubUnderTest, name: str) -> bool:
    _, wl = await hub.call("GET", f"{API}/namespaces/vision/workloads/{name}")
    conditions = (wl.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


async def test_urgent_work_is_offered_where_lower_priorities_of_its_queue_hold_room(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="1", west_cpu="1")
    lower = {"withinClusterQueue": "LowerPriority"}
    status, body = await hub.edit(
        f"{API}/clusterqueues/team-vision", lambda cq: cq["spec"].update(preemption=lower)
    )
    assert status == 200, body
    for name in ("low-0", "low-1"):
        key = await submit(hub, name, 0)
        agent = await offered((east, west), key)
        await agent.send(report(key, 1, WorkloadPhase.ADMITTED, admission=admission("1", "1Gi")))
        await eventually(lambda name=name: admitted(hub, name))
    for agent in (east, west):  # (reports after the admissions: their room shows taken)
        full = capacity(agent.name, "0")
        full.observed_at = datetime.now(UTC)
        await agent.send(full)

    first = await submit(hub, "urgent-0", 100)
    took = await offered((east, west), first)
    await took.send(report(first, 1, WorkloadPhase.PENDING))  # preempting there
    second = await submit(hub, "urgent-1", 100)
    other = await offered((east, west), second)
    assert other is not took  # the first cluster's lower priority is spoken for
    await other.send(report(second, 1, WorkloadPhase.PENDING))
    await submit(hub, "urgent-2", 100)
    await submit(hub, "low-2", 0)
    await no_offer(east)
    await no_offer(west, within=0.3)
    await east.close()
    await west.close()
