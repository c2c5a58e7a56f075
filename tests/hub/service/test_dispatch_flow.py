"""A submitted workload is offered to the cluster with the most headroom, bound when its agent
admits it, finished when it reports so; rejections move it on, lost clusters are skipped and
keep their workloads until their loss timeout, and a restarted hub forgets nothing."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from api.quantity import Quantity
from api.v1alpha1.messages import (
    CapacityReport,
    ConfigSync,
    DispatchOffer,
    HeldWorkload,
    Hello,
    LogData,
    LogLine,
    LogOpen,
    NodeSummary,
    OfferRejected,
    QueueCapacity,
    RejectReason,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.workload import Admission
from hub.dispatch import Dispatcher
from hub.queue_status import QueueStatusWriter
from hub.state import SOURCE_PREFIX
from tests.hub.service.conftest import (
    ALICE,
    HubUnderTest,
    ScriptedAgent,
    connect_agent,
    fleet_objects,
    job,
)

API = "/apis/multiq.dev/v1alpha1"


def capacity(cluster: str, free_cpu: str, used_cpu: str = "0") -> CapacityReport:
    """team-vision's room on `cluster`: 8 CPUs nominal (`used_cpu` of them in use), `free_cpu`
    free now; 32Gi of memory, all free."""
    return CapacityReport(
        cluster=cluster,
        observed_at=datetime.now(UTC),
        queues=[
            QueueCapacity(
                cluster_queue="team-vision",
                flavor="default",
                resource=r,
                nominal=Quantity.parse(n),
                usage=Quantity.parse(u),
                headroom=Quantity.parse(h),
            )
            for r, n, u, h in (("cpu", "8", used_cpu, free_cpu), ("memory", "32Gi", "0", "32Gi"))
        ],
    )


async def submit(hub: HubUnderTest, name: str = "train", **kwargs: Any) -> str:
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job(name, **kwargs)
    )
    assert status == 201, wl
    return f"vision/{wl['metadata']['name']}"


async def workload(hub: HubUnderTest, key: str) -> dict[str, Any]:
    ns, name = key.split("/")
    status, body = await hub.call("GET", f"{API}/namespaces/{ns}/workloads/{name}")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def waiting_message_of(hub: HubUnderTest, key: str, reason: str) -> str | None:
    for c in (await workload(hub, key)).get("status", {}).get("conditions", []):
        if c["type"] == "QuotaReserved" and c["reason"] == reason:
            return str(c["message"])
    return None


async def waiting_message(hub: HubUnderTest, key: str) -> str | None:
    return await waiting_message_of(hub, key, "Waiting")


async def eventually(check: Any, within: float = 5.0) -> Any:
    async with asyncio.timeout(within):
        while True:
            result = await check()
            if result:
                return result
            await asyncio.sleep(0.05)


async def two_clusters(
    hub: HubUnderTest, east_cpu: str = "2", west_cpu: str = "6"
) -> tuple[ScriptedAgent, ScriptedAgent]:
    await hub.apply(*fleet_objects())
    east = await connect_agent(hub, "east")
    west = await connect_agent(hub, "west")
    await east.expect(ConfigSync)
    await west.expect(ConfigSync)
    await east.send(capacity("east", east_cpu))
    await west.send(capacity("west", west_cpu))
    return east, west


def report(key: str, generation: int, phase: WorkloadPhase, **kw: Any) -> WorkloadStatusReport:
    return WorkloadStatusReport(workload=key, generation=generation, phase=phase, **kw)


async def test_a_connected_agent_gets_the_queue_configuration(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    agent = await connect_agent(hub, "east")
    sync = await agent.expect(ConfigSync)
    assert [cq.name for cq in sync.cluster_queues] == ["team-vision"]
    assert [lq.key() for lq in sync.local_queues] == ["vision/vision"]

    async def connected() -> dict[str, Any] | None:
        _, member = await hub.call("GET", f"{API}/memberclusters/east")
        status = member.get("status", {})
        return status if status.get("connected") else None

    status = await eventually(connected)
    assert status["agentVersion"] == "test-0"
    await agent.close()


async def test_configuration_changes_are_pushed_to_connected_agents(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    agent = await connect_agent(hub, "east")
    await agent.expect(ConfigSync)
    await hub.apply(
        {"apiVersion": "multiq.dev/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    )
    sync = await agent.expect(ConfigSync)
    assert sorted(f.name for f in sync.resource_flavors) == ["default", "gpu"]
    await agent.close()


async def test_tenants_namespaces_are_pushed_with_their_tenant_label(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    agent = await connect_agent(hub, "east")
    first = await agent.expect(ConfigSync)  # (the fleet's tenant "vision" owns "vision")
    assert [(n.name, n.labels) for n in first.namespaces] == [
        ("vision", {"multiq.dev/tenant": "vision"})
    ]
    for name, namespaces in (("robotics", ["robotics", "robotics-dev"]), ("nlp", ["nlp"])):
        await hub.apply(
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "kind": "Tenant",
                "metadata": {"name": name},
                "spec": {"namespaces": namespaces},
            }
        )

    async def both() -> ConfigSync | None:
        sync = await agent.expect(ConfigSync)
        return sync if len(sync.namespaces) == 4 else None

    sync = await eventually(both)
    assert [(n.name, n.labels) for n in sync.namespaces] == [
        ("nlp", {"multiq.dev/tenant": "nlp"}),
        ("robotics", {"multiq.dev/tenant": "robotics"}),
        ("robotics-dev", {"multiq.dev/tenant": "robotics"}),
        ("vision", {"multiq.dev/tenant": "vision"}),
    ]
    await agent.close()


async def test_the_cluster_with_the_most_headroom_is_bound_and_offered_the_workload(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == key and offer.generation == 1
    assert offer.source is not None and offer.source["kind"] == "Job"
    # BestFit binds before it offers: only west may run generation 1.
    assert offer.bound
    assert (await workload(hub, key))["status"]["clusterName"] == "west"
    admission = Admission(cluster_queue="team-vision")
    await west.send(report(key, 1, WorkloadPhase.ADMITTED, admission=admission))

    async def admitted() -> dict[str, Any] | None:
        wl = await workload(hub, key)
        conditions = {c["type"]: c["status"] for c in wl["status"]["conditions"]}
        return wl if conditions.get("Admitted") == "True" else None

    wl = await eventually(admitted)
    conditions = {c["type"]: c for c in wl["status"]["conditions"]}
    assert wl["status"]["clusterName"] == "west"
    assert conditions["Admitted"]["message"] == (
        "admitted on cluster west by ClusterQueue team-vision"
    )
    await west.send(report(key, 1, WorkloadPhase.SUCCEEDED))

    async def finished() -> bool:
        wl = await workload(hub, key)
        return any(
            c["type"] == "Finished" and c["status"] == "True" for c in wl["status"]["conditions"]
        )

    await eventually(finished)
    await east.close()
    await west.close()


async def test_an_offer_carries_the_workload_without_status_and_the_submitted_job_as_stored(
    hub: HubUnderTest,
) -> None:
    # (The hub writes an offer's workload and source from their stored forms, not by
    # encoding its models again: what the agent decodes must be what the hub holds — less
    # the status, which the agent does not read: it gives the workload its own.)
    east, west = await two_clusters(hub)
    key = await submit(hub)
    offer = await west.expect(DispatchOffer)
    entry = hub.hub.state.workloads[key]
    assert entry.workload.status is not None
    assert offer.workload.status is None
    assert offer.workload == entry.workload.model_copy(update={"status": None})
    stored = await workload(hub, key)
    assert "status" in stored
    assert offer.workload.to_wire() == {k: v for k, v in stored.items() if k != "status"}
    stored_source = await hub.hub.store.get(f"{SOURCE_PREFIX}{key}")
    assert offer.source == stored_source.value
    await east.close()
    await west.close()


async def test_a_clusters_status_shows_its_capacity_with_bytes_in_binary_units(
    hub: HubUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    east, west = await two_clusters(hub)
    monkeypatch.setattr("hub.sessions.CAPACITY_STATUS_EVERY_SECONDS", 0)
    report = capacity("east", "2")
    report.nodes = NodeSummary(
        total=4,
        ready=4,
        allocatable={"cpu": Quantity.parse("32"), "memory": Quantity.parse("128Gi")},
        free={"cpu": Quantity.parse("30"), "memory": Quantity.parse("120Gi")},
    )
    await east.send(report)

    async def resources() -> list[dict[str, str]] | None:
        _, member = await hub.call("GET", f"{API}/memberclusters/east")
        found = member.get("status", {}).get("capacity", {}).get("resources")
        return found if found and found[0]["allocatable"] == "32" else None

    assert await eventually(resources) == [
        {"name": "cpu", "allocatable": "32", "used": "2", "headroom": "30"},
        {"name": "memory", "allocatable": "128Gi", "used": "8Gi", "headroom": "120Gi"},
    ]
    await east.close()
    await west.close()


async def test_a_sessions_first_capacity_report_shows_at_once_and_later_ones_at_most_every_few_seconds(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, east_cpu="2")  # each sends its session's first report

    async def east_headroom() -> str | None:
        _, member = await hub.call("GET", f"{API}/memberclusters/east")
        for flavor in member.get("status", {}).get("capacity", {}).get("flavors", []):
            return str(flavor["resources"][0]["headroom"])
        return None

    # Well inside the throttle: a cluster that just connected shows its room (qctl dev up
    # waits for it), not CAPACITY_STATUS_EVERY_SECONDS later.
    assert await eventually(east_headroom, within=1.0) == "2"
    await east.send(capacity("east", "5"))
    await asyncio.sleep(0.5)
    assert await east_headroom() == "2"  # the next one waits its turn

    async def shows(headroom: str | None) -> bool:
        return await east_headroom() == headroom

    # Capacity under other queues is news: an agent's report as it connects, before it has
    # applied the configuration, has none; the one after shows at once.
    await east.close()
    east = await connect_agent(hub, "east")
    await east.send(CapacityReport(cluster="east", observed_at=datetime.now(UTC)))
    assert await eventually(lambda: shows(None), within=1.0)
    await east.expect(ConfigSync)
    await east.send(capacity("east", "7"))
    assert await eventually(lambda: shows("7"), within=1.0)
    await east.close()
    await west.close()


async def test_a_rejected_offer_goes_to_the_next_cluster(hub: HubUnderTest) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    offer = await west.expect(DispatchOffer)
    await west.send(
        OfferRejected(
            workload=key,
            generation=offer.generation,
            reason=RejectReason.INADMISSIBLE,
            message="no GPUs here",
        )
    )
    second = await east.expect(DispatchOffer)
    assert second.workload.key() == key and second.generation == offer.generation + 1
    wl = await workload(hub, key)
    reasons = {r["cluster"]: r for r in wl["status"]["clusterPendingReasons"]}
    assert reasons["west"]["reason"] == "Rejected:Inadmissible"
    assert reasons["west"]["message"] == "no GPUs here"
    await east.close()
    await west.close()


async def test_a_workload_that_fits_nowhere_waits_with_a_reason(hub: HubUnderTest) -> None:
    east, west = await two_clusters(hub, "1", "1")
    key = await submit(hub, cpu="2")
    message = await eventually(lambda: waiting_message(hub, key))
    assert message == "no cluster can take it now: 2 InsufficientHeadroom"
    await east.send(capacity("east", "8"))
    offer = await east.expect(DispatchOffer)
    assert offer.workload.key() == key
    await east.close()
    await west.close()


async def test_a_deep_queue_of_one_shape_is_placed_once_per_cycle_and_every_workload_told_why(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "2", "2")
    dispatcher = hub.hub.dispatcher
    placed: list[tuple[int, tuple[tuple[str, int], ...]]] = []
    dispatcher.observers.append(
        lambda plan: placed.extend((dispatcher.cycles, shape) for shape in plan.placed)
    )
    large = [await submit(hub, f"large-{i}", cpu="2") for i in range(6)]  # 4 CPUs each

    async def told_why() -> bool:
        for key in large:
            conditions = (await workload(hub, key)).get("status", {}).get("conditions", [])
            if not any(
                c["reason"] == "Waiting"
                and c["message"] == "no cluster can take it now: 2 InsufficientHeadroom"
                for c in conditions
            ):
                return False
        return True

    await eventually(told_why)
    # Another shape is placed on its own merits: the small one fits.
    small = await submit(hub, "small", cpu="1", completions=1)
    offer = await east.expect(DispatchOffer)
    assert offer.workload.key() == small
    per_cycle = list(Counter(placed).values())
    assert per_cycle and max(per_cycle) == 1, Counter(placed)
    # Until room may have appeared, the shape that fit nowhere is not placed again at all,
    # however many cycles run.
    large_shape = next(shape for _, shape in placed if ("cpu", 4000) in shape)
    placed_so_far = [shape for _, shape in placed].count(large_shape)
    cycles = dispatcher.cycles
    for _ in range(5):
        dispatcher.wake()
        await asyncio.sleep(0.05)
    assert dispatcher.cycles > cycles
    assert [shape for _, shape in placed].count(large_shape) == placed_so_far
    # Room appears: the large ones are placed again, in the next cycle.
    await west.send(capacity("west", "8"))
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() in large
    await east.close()
    await west.close()


def count_visits(dispatcher: Dispatcher) -> list[str]:
    """The keys of the workloads the dispatcher looks at, cycle after cycle."""
    visited: list[str] = []
    dispatcher.observers.append(lambda plan: visited.extend(plan.visited))
    return visited


def refresh_waiting_every(dispatcher: Dispatcher, seconds: float) -> None:
    dispatcher.settings = replace(dispatcher.settings, waiting_refresh_seconds=seconds)


async def report_capacities(
    hub: HubUnderTest, agent: ScriptedAgent, cluster: str, free_cpus: list[str]
) -> None:
    """Send each capacity report, and let two dispatch cycles run after each."""
    dispatcher = hub.hub.dispatcher
    for free in free_cpus:
        await agent.send(capacity(cluster, free))
        cycles = dispatcher.cycles

        async def two_more_cycles(cycles: int = cycles) -> bool:
            return dispatcher.cycles > cycles + 1

        await eventually(two_more_cycles)
        await asyncio.sleep(0.1)


async def test_a_parked_deep_queue_costs_a_cycle_one_placement_of_its_shape_not_a_visit_each(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "2", "2")
    dispatcher = hub.hub.dispatcher
    # Refreshing Waiting messages is no reason to look at them while their reason holds.
    refresh_waiting_every(dispatcher, 0.2)
    visited = count_visits(dispatcher)
    placed: list[int] = []
    dispatcher.observers.append(lambda plan: placed.extend(dispatcher.cycles for _ in plan.placed))
    large = [await submit(hub, f"large-{i}", cpu="2") for i in range(6)]  # 4 CPUs each
    for key in large:
        await eventually(lambda key=key: waiting_message(hub, key))
    await asyncio.sleep(0.1)  # the Waiting writes come back; each is looked at once more
    visited.clear()
    placed.clear()
    # Room may have grown (a capacity report), but not enough: each report costs one
    # placement of the shape, and no parked workload is looked at.
    await report_capacities(hub, east, "east", ["3", "2", "3"])
    assert [key for key in visited if key in large] == []
    assert 1 <= len(placed) <= 3
    assert await waiting_message(hub, large[-1]) == (
        "no cluster can take it now: 2 InsufficientHeadroom"
    )
    # Enough room: the shape is placed, and its oldest workload offered.
    await west.send(capacity("west", "8"))
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == large[0]
    await east.close()
    await west.close()


async def test_room_for_a_few_of_a_parked_deep_queue_looks_at_those_few_and_the_next(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "2", "2")
    dispatcher = hub.hub.dispatcher
    visited = count_visits(dispatcher)
    large = [await submit(hub, f"large-{i:02}", cpu="2") for i in range(12)]  # 4 CPUs each
    for key in large:
        await eventually(lambda key=key: waiting_message(hub, key))
    await asyncio.sleep(0.1)  # the Waiting writes come back; each is looked at once more
    visited.clear()
    # Room for two: the two oldest are offered, the third is found not to fit, and the nine
    # after it are not looked at (a deep array's freed slot must not cost the whole array).
    await west.send(capacity("west", "8"))
    offered = [(await west.expect(DispatchOffer)).workload.key() for _ in range(2)]
    assert offered == large[:2]
    await asyncio.sleep(0.1)
    assert [key for key in visited if key in large] == large[:3]
    # The rest are still parked with what they were told, and go, oldest first, when room
    # for them appears.
    assert await waiting_message(hub, large[-1]) == (
        "no cluster can take it now: 2 InsufficientHeadroom"
    )
    await east.send(capacity("east", "4"))
    assert (await east.expect(DispatchOffer)).workload.key() == large[2]
    await east.close()
    await west.close()


async def test_a_parked_deep_queue_is_told_new_reasons_after_the_refresh_interval(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "2", "2")
    refresh_waiting_every(hub.hub.dispatcher, 0.3)
    large = [await submit(hub, f"large-{i}", cpu="2") for i in range(4)]  # 4 CPUs each
    before = "no cluster can take it now: 2 InsufficientHeadroom"
    for key in large:
        await eventually(lambda key=key: waiting_message(hub, key))
        assert await waiting_message(hub, key) == before
    # Both clusters shrink below the shape: a new reason, which every parked workload is told.
    for agent, name in ((east, "east"), (west, "west")):
        report = capacity(name, "2")
        for queue in report.queues:
            if queue.resource == "cpu":
                queue.nominal = Quantity.parse("2")
        await agent.send(report)

    async def all_told() -> bool:
        messages = [await waiting_message(hub, key) for key in large]
        return all(m is not None and m != before for m in messages)

    await eventually(all_told)
    assert await waiting_message(hub, large[-1]) == "too large for every cluster of its cluster set"
    await east.close()
    await west.close()


def global_queue(fleet_cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "GlobalQueue",
        "metadata": {"name": "vision"},
        "spec": {"clusterSet": "all", "fleetQuota": {"cpu": fleet_cpu}},
    }


async def governed_clusters(
    hub: HubUnderTest, *, west_cpu: str, fleet_cpu: str
) -> tuple[ScriptedAgent, ScriptedAgent]:
    """Two clusters (east with no room) in cluster set `all`, governed by GlobalQueue
    `vision` with a CPU fleet quota."""
    east, west = await two_clusters(hub, "0", west_cpu)
    await hub.apply(
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterSet",
            "metadata": {"name": "all"},
            "spec": {"clusters": ["east", "west"]},
        },
        global_queue(fleet_cpu),
    )
    return east, west


async def test_a_fleet_quota_holds_back_what_would_exceed_it_until_work_finishes_or_it_grows(
    hub: HubUnderTest,
) -> None:
    east, west = await governed_clusters(hub, west_cpu="8", fleet_cpu="4")
    first, second = await submit(hub, "first"), await submit(hub, "second")  # 2 CPUs each
    for key in (first, second):
        offer = await west.expect(DispatchOffer)
        assert offer.workload.key() == key
        await west.send(
            report(key, 1, WorkloadPhase.ADMITTED, admission=Admission(cluster_queue="team-vision"))
        )

    third = await submit(hub, "third")
    assert await eventually(lambda: waiting_message_of(hub, third, "FleetQuotaExceeded")) == (
        "fleet quota of GlobalQueue vision for cpu is 4 and too little of it is free: "
        "the workload needs 2"
    )
    # The first finishes: its share of the fleet quota is free again.
    await west.send(report(first, 1, WorkloadPhase.SUCCEEDED))
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == third

    fourth = await submit(hub, "fourth")
    assert await eventually(lambda: waiting_message_of(hub, fourth, "FleetQuotaExceeded")) == (
        "fleet quota of GlobalQueue vision for cpu is 4 and too little of it is free: "
        "the workload needs 2"
    )
    # The quota grows: the usage is counted under the new configuration.
    grow = {"cpu": "6"}
    status, reply = await hub.edit(
        f"{API}/globalqueues/vision", lambda gq: gq["spec"].update(fleetQuota=grow)
    )
    assert status == 200, reply
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == fourth
    await east.close()
    await west.close()


async def test_a_deep_queue_over_its_fleet_quota_is_not_looked_at_until_its_usage_falls(
    hub: HubUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    east, west = await governed_clusters(hub, west_cpu="8", fleet_cpu="2")
    visited = count_visits(hub.hub.dispatcher)
    first = await submit(hub, "first")  # 2 CPUs: all of the quota
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == first
    await west.send(
        report(first, 1, WorkloadPhase.ADMITTED, admission=Admission(cluster_queue="team-vision"))
    )
    held = [await submit(hub, f"held-{i}") for i in range(5)]
    for key in held:
        await eventually(lambda key=key: waiting_message_of(hub, key, "FleetQuotaExceeded"))
    await asyncio.sleep(0.1)  # the Waiting writes come back; each is looked at once more
    visited.clear()
    # Cycles run (capacity reports, which do not touch the quota): none of them is looked at.
    await report_capacities(hub, west, "west", ["7", "8", "7"])
    assert [key for key in visited if key in held] == []
    # The usage falls: the oldest held workload is offered.
    await west.send(report(first, 1, WorkloadPhase.SUCCEEDED))
    offer = await west.expect(DispatchOffer)
    assert offer.workload.key() == held[0]
    await east.close()
    await west.close()


async def test_queues_and_cluster_sets_report_their_workloads_usage_and_connected_clusters(
    hub: HubUnderTest,
) -> None:
    east, west = await governed_clusters(hub, west_cpu="6", fleet_cpu="100")
    running, offered = await submit(hub, "running"), await submit(hub, "offered")
    offers = {(await west.expect(DispatchOffer)).workload.key() for _ in range(2)}
    assert offers == {running, offered}
    await west.send(report(running, 1, WorkloadPhase.ADMITTED))
    await submit(hub, "waiting", cpu="8")  # 16 CPUs: more than any cluster has room for

    async def status_of(path: str) -> dict[str, Any]:
        _, body = await hub.call("GET", f"{API}/{path}")
        return body.get("status") or {}

    async def queue_says_so() -> bool:
        status = await status_of("globalqueues/vision")
        return (
            status.get("pendingWorkloads"),
            status.get("dispatchedWorkloads"),
            status.get("runningWorkloads"),
            status.get("fleetUsage"),
        ) == (1, 1, 1, {"cpu": "4", "memory": "4Gi"})

    await eventually(queue_says_so)

    async def local_and_cluster_queues_say_so() -> bool:
        # Kueue's counts: the offered and the waiting wait for admission, one is admitted.
        want = (2, 1, 1)
        counted = []
        for path in ("namespaces/vision/localqueues/vision", "clusterqueues/team-vision"):
            status = await status_of(path)
            counted.append(
                (
                    status.get("pendingWorkloads"),
                    status.get("reservingWorkloads"),
                    status.get("admittedWorkloads"),
                )
            )
        return counted == [want, want]

    await eventually(local_and_cluster_queues_say_so)
    assert await status_of("clustersets/all") == {
        "clusters": ["east", "west"],
        "connectedClusters": 2,
    }
    await east.close()

    async def one_connected() -> bool:
        return (await status_of("clustersets/all")).get("connectedClusters") == 1

    await eventually(one_connected)
    # Once the statuses say what they should, another round writes nothing.
    h = hub.hub
    writer = QueueStatusWriter(h.state, h.fleet, h.dispatcher, h.repo, interval_seconds=1)

    async def settled() -> bool:
        return await writer.write_changed() == 0

    await eventually(settled)
    assert await writer.write_changed() == 0
    await west.close()


async def test_the_only_cluster_that_can_run_a_workload_gets_it_queued_and_keeps_it(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "1", "8")
    # West stops serving the cluster queue: east, full for now, is the only place it can run.
    await west.send(CapacityReport(cluster="west", observed_at=datetime.now(UTC), queues=[]))
    await asyncio.sleep(0.2)
    key = await submit(hub, cpu="2")
    offer = await east.expect(DispatchOffer)
    await east.send(
        report(
            key,
            offer.generation,
            WorkloadPhase.PENDING,
            pending_reason="InsufficientQuota",
            pending_message="cpu: 4 more needed in flavor default",
        )
    )

    async def queued() -> dict[str, Any] | None:
        wl = await workload(hub, key)
        reasons = {r["cluster"]: r for r in wl["status"].get("clusterPendingReasons", [])}
        return wl if reasons.get("east", {}).get("reason") == "InsufficientQuota" else None

    wl = await eventually(queued)
    assert wl["status"]["clusterName"] == "east"  # bound there, queued until quota frees
    # Held there: no new round of offers while east keeps it queued.
    with pytest.raises(TimeoutError):
        await east.expect(DispatchOffer, within=1.0)
    wl = await workload(hub, key)
    assert wl["status"]["dispatchGeneration"] == offer.generation
    await east.send(report(key, offer.generation, WorkloadPhase.ADMITTED))
    await eventually(lambda: _admitted_on(hub, key, "east"))
    await east.close()
    await west.close()


async def _admitted_on(hub: HubUnderTest, key: str, cluster: str) -> bool:
    st = (await workload(hub, key)).get("status", {})
    admitted = any(c["type"] == "Admitted" and c["status"] == "True" for c in st["conditions"])
    return bool(st.get("clusterName") == cluster and admitted)


async def test_a_lost_cluster_is_skipped_and_keeps_its_workload_until_the_loss_timeout(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub, "6", "8")
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(
        report(key, 1, WorkloadPhase.RUNNING, admission=Admission(cluster_queue="team-vision"))
    )
    await eventually(lambda: _bound_to(hub, key, "west"))
    await west.close()

    async def lost() -> bool:
        _, member = await hub.call("GET", f"{API}/memberclusters/west")
        return member["status"]["connected"] is False and "lostSince" in member["status"]

    await eventually(lost)
    # Within the loss timeout the workload stays bound: west may still be running it.
    assert await _bound_to(hub, key, "west")
    # A new workload skips the lost cluster even though it had more headroom.
    other = await submit(hub, "other")
    offer = await east.expect(DispatchOffer)
    assert offer.workload.key() == other
    # After the loss timeout (2 s in this fleet) the workload is requeued and offered to east.
    again = await east.expect(DispatchOffer, within=10)
    assert again.workload.key() == key and again.generation == 2
    wl = await workload(hub, key)
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["reason"] == "ClusterLost"
    await east.close()


async def _bound_to(hub: HubUnderTest, key: str, cluster: str) -> bool:
    wl = await workload(hub, key)
    return bool(wl.get("status", {}).get("clusterName") == cluster)


async def test_a_reconnecting_agent_is_told_to_drop_what_the_hub_gave_elsewhere(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.ADMITTED))
    await eventually(lambda: _bound_to(hub, key, "west"))
    stale = HeldWorkload(workload=key, generation=1, phase=WorkloadPhase.RUNNING)
    await east.close()
    east = await connect_agent(
        hub, "east", hello=Hello(cluster="east", agent_version="t", workloads=[stale])
    )
    withdraw = await east.expect(Withdraw)
    assert withdraw.workload == key and withdraw.reason == "NotDispatchedHere"
    await east.close()
    await west.close()


async def test_a_reconnecting_agent_is_sent_again_what_the_hub_gave_it_and_it_does_not_hold(
    hub: HubUnderTest,
) -> None:
    east, west = await two_clusters(hub)
    bound, offered = await submit(hub, "bound"), await submit(hub, "offered")
    for _ in range(2):
        offer = await west.expect(DispatchOffer)
        if offer.workload.key() == bound:
            await west.send(report(bound, 1, WorkloadPhase.ADMITTED))
    await eventually(lambda: _bound_to(hub, bound, "west"))
    await west.close()
    # Back with an empty hello (its state was lost): both come again, bound one included.
    west = await connect_agent(hub, "west")
    again = {(await west.expect(DispatchOffer)).workload.key() for _ in range(2)}
    assert again == {bound, offered}
    await east.close()
    await west.close()


async def test_a_deleted_workload_is_cancelled_on_its_cluster(hub: HubUnderTest) -> None:
    from api.v1alpha1.messages import Cancel

    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    await eventually(lambda: _bound_to(hub, key, "west"))
    name = key.split("/")[1]
    status, _ = await hub.call("DELETE", f"{API}/namespaces/vision/workloads/{name}", token=ALICE)
    assert status == 200
    cancel = await west.expect(Cancel)
    assert cancel.workload == key and cancel.reason == "WorkloadDeleted"
    await east.close()
    await west.close()


async def test_logs_stream_from_the_workloads_cluster(hub: HubUnderTest) -> None:
    east, west = await two_clusters(hub)
    key = await submit(hub)
    await west.expect(DispatchOffer)
    await west.send(report(key, 1, WorkloadPhase.RUNNING))
    await eventually(lambda: _bound_to(hub, key, "west"))
    log_lane = await connect_agent(hub, "west", lane="logs")
    await asyncio.sleep(0.1)

    async def answer() -> None:
        opened = await log_lane.expect(LogOpen)
        lines = [LogLine(text="epoch 1"), LogLine(text="epoch 2")]
        await log_lane.send(
            LogData(
                stream_id=opened.stream_id,
                workload=key,
                cluster="west",
                pod="train-0",
                container="main",
                lines=lines,
            )
        )
        await log_lane.send(
            LogData(
                stream_id=opened.stream_id,
                workload=key,
                cluster="west",
                pod="",
                container="",
                eof=True,
            )
        )

    responder = asyncio.create_task(answer())
    headers = {"Authorization": f"Bearer {ALICE}"}
    name = key.split("/")[1]
    async with hub.session.get(
        f"{hub.url}{API}/namespaces/vision/workloads/{name}/log", headers=headers
    ) as response:
        body = await response.text()
    await responder
    assert body.splitlines() == [
        '{"cluster":"west","pod":"train-0","container":"main","line":"epoch 1"}',
        '{"cluster":"west","pod":"train-0","container":"main","line":"epoch 2"}',
    ]
    await log_lane.close()
    await east.close()
    await west.close()
