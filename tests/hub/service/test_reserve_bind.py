"""Reserve, then bind, over real agent sessions (docs/exactly-once.md): several clusters are
asked to reserve, the first reservation is bound and the rest withdrawn; a cluster that holds
neither reservation nor binding is refused — its reports, its reservations and its log lines;
a bound offer that times out is asked back, not given elsewhere; agents renew leases, and one
that stops renewing is cut off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.v1alpha1.messages import (
    Bind,
    DispatchOffer,
    HeldWorkload,
    Hello,
    LeaseGrant,
    LogData,
    LogLine,
    Withdraw,
    WorkloadPhase,
)
from api.v1alpha1.workload import Admission
from hub.loghub import LogRequest
from tests.hub.service.conftest import (
    HubUnderTest,
    ScriptedAgent,
    connect_agent,
    fleet_objects,
)
from tests.hub.service.test_dispatch_flow import (
    API,
    eventually,
    report,
    submit,
    two_clusters,
    workload,
)


def all_at_once() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterSet",
            "metadata": {"name": "all"},
            "spec": {"clusters": ["east", "west"]},
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "GlobalQueue",
            "metadata": {"name": "vision"},
            "spec": {"clusterSet": "all", "dispatchPolicy": {"type": "AllAtOnce"}},
        },
    ]


async def reservation_requests(hub: HubUnderTest) -> tuple[ScriptedAgent, ScriptedAgent, str]:
    east, west = await two_clusters(hub, "6", "6")
    await hub.apply(*all_at_once())
    await asyncio.sleep(0.2)
    key = await submit(hub)
    for agent in (east, west):
        offer = await agent.expect(DispatchOffer)
        assert offer.workload.key() == key and not offer.bound and offer.generation == 1
    return east, west, key


async def status_of(hub: HubUnderTest, key: str) -> dict[str, Any]:
    return (await workload(hub, key)).get("status", {})  # type: ignore[no-any-return]


async def test_all_at_once_binds_the_first_reservation_and_withdraws_the_other(
    hub: HubUnderTest,
) -> None:
    east, west, key = await reservation_requests(hub)
    admission = Admission(cluster_queue="team-vision")
    await west.send(report(key, 1, WorkloadPhase.RESERVED, admission=admission))
    bind = await west.expect(Bind)
    assert (bind.workload, bind.generation) == (key, 1)
    withdraw = await east.expect(Withdraw)
    assert (withdraw.workload, withdraw.reason) == (key, "BoundElsewhere")
    st = await status_of(hub, key)
    assert st["clusterName"] == "west" and not st.get("nominatedClusterNames")
    # East reserved too, a moment later: it lost the race, is refused and told again.
    await east.send(report(key, 1, WorkloadPhase.RESERVED, admission=admission))
    again = await east.expect(Withdraw)
    assert again.reason == "BoundElsewhere"
    assert (await status_of(hub, key))["clusterName"] == "west"
    await east.close()
    await west.close()


async def test_a_cluster_that_holds_neither_reservation_nor_binding_cannot_touch_the_workload(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    await eventually(lambda: _admitted(hub, key))
    before = await status_of(hub, key)
    # East was never offered it: it claims to have finished it, and to run it.
    await east.send(report(key, 1, WorkloadPhase.SUCCEEDED))
    await east.send(report(key, 1, WorkloadPhase.RUNNING))
    withdraw = await east.expect(Withdraw)
    assert withdraw.workload == key and withdraw.reason == "BoundElsewhere"
    after = await status_of(hub, key)
    assert after == before
    assert not any(c["type"] == "Finished" for c in after["conditions"])
    await east.close()
    await west.close()


async def _admitted(hub: HubUnderTest, key: str) -> bool:
    st = await status_of(hub, key)
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in st["conditions"])


async def test_log_lines_from_a_cluster_that_does_not_run_the_workload_are_refused(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    logs = await connect_agent(hub, "east", lane="logs")
    line = LogLine(text="I finished your job")
    forged = LogData(
        stream_id="made-up", workload=key, cluster="east", pod="p", container="c", lines=[line]
    )
    await logs.send(forged)
    # Nor may it ship lines unasked for the generation another cluster holds.
    shipped = forged.model_copy(
        update={"stream_id": "ship/1", "shipped": True, "generation": 1, "seq": 1}
    )
    await logs.send(shipped.model_copy(update={"from_start": True}))
    loghub = hub.hub.logs
    await eventually(_true_when(lambda: loghub.refused >= 2))
    assert await loghub.stored(LogRequest(key)) == []
    namespace, name = key.split("/")
    status, body = await hub.call("GET", f"{API}/namespaces/{namespace}/workloads/{name}/log")
    assert status == 200 and "I finished your job" not in str(body)
    await logs.close()
    await east.close()
    await west.close()


def _true_when(check: Any) -> Any:
    async def wrapped() -> bool:
        return bool(check())

    return wrapped


async def test_a_bound_offer_not_answered_in_time_is_asked_back_not_given_elsewhere(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    offer = await west.expect(DispatchOffer)
    assert offer.bound
    # West says nothing for the offer timeout (5 s in this hub): it may be creating the Job.
    withdraw = await west.expect(Withdraw, within=10)
    assert (withdraw.workload, withdraw.reason) == (key, "OfferTimedOut")
    with pytest.raises(TimeoutError):
        await east.expect(DispatchOffer, within=1.0)
    assert (await status_of(hub, key))["clusterName"] == "west"
    # West gives it back: now, and only now, it may go to east.
    await west.send(
        report(key, 1, WorkloadPhase.WITHDRAWN, pending_reason="OfferTimedOut", pending_message="x")
    )
    second = await east.expect(DispatchOffer, within=5)
    assert second.workload.key() == key and second.generation == 2 and second.bound
    await east.close()
    await west.close()


async def test_an_agent_renews_its_lease_on_the_member_clusters_terms(hub: HubUnderTest) -> None:
    east, west = await two_clusters(hub)
    grant = await east.expect(LeaseGrant)
    assert (grant.lease_seconds, grant.grace_seconds, grant.enabled) == (3, 1, True)
    await east.close()
    await west.close()


async def test_an_agent_that_stops_renewing_its_lease_is_cut_off(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    silent = await connect_agent(hub, "east", renew=False)

    async def lost() -> bool:
        _, member = await hub.call("GET", f"{API}/memberclusters/east")
        return member.get("status", {}).get("connected") is False

    await eventually(lost, within=10)
    assert silent.reader is not None
    async with asyncio.timeout(5):
        await silent.reader  # the hub closed the session
    await silent.close()


async def test_a_reconnecting_agent_holding_a_bound_reservation_is_sent_its_bind_again(
    hub: HubUnderTest,
) -> None:
    east, west, key = await reservation_requests(hub)
    await west.send(report(key, 1, WorkloadPhase.RESERVED))
    await west.expect(Bind)
    await west.close()  # the session drops before the agent saw the Bind, say
    held = HeldWorkload(workload=key, generation=1, phase=WorkloadPhase.RESERVED)
    west = await connect_agent(
        hub, "west", hello=Hello(cluster="west", agent_version="t", workloads=[held])
    )
    bind = await west.expect(Bind)
    assert (bind.workload, bind.generation) == (key, 1)
    await east.close()
    await west.close()


async def test_lease_renewals_keep_a_quiet_agent_connected(hub: HubUnderTest) -> None:
    east, west = await two_clusters(hub)
    renewals = 0
    for _ in range(3):
        await east.expect(LeaseGrant)
        renewals += 1
    await asyncio.sleep(4)  # longer than the lease: renewals alone keep the session
    _, member = await hub.call("GET", f"{API}/memberclusters/east")
    assert member["status"]["connected"] is True and renewals == 3
    await east.close()
    await west.close()
