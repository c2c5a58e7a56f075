"""The hub orders waiting work across the fleet by fair share: two tenants weighted 70/30,
the heavier of which has used the fleet more than its share, wait for the same room; the light
tenant's work goes first although it was submitted later — as real Slurm 22.05 ordered a light
user before a heavy one in the same setting (slurm.md). Usage is kept in the store and each
Tenant's status shows its share, usage and users' factors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from api.v1alpha1.messages import CapacityReport, DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import Admission
from hub.fairshare import USAGE_KEY
from hub.store.base import NotFound
from tests.hub.service.conftest import ALICE, BOB, HubUnderTest, fleet_objects, job, running_hub
from tests.hub.service.test_dispatch_flow import (
    API,
    capacity,
    eventually,
    report,
    two_clusters,
)


async def weigh_tenants_70_30(hub: HubUnderTest) -> None:
    """fleet_objects' tenant vision (alice) gets 70 shares; a tenant audio (bob) 30."""
    status, reply = await hub.edit(
        f"{API}/tenants/vision", lambda t: t["spec"].update(fairSharingWeight="70")
    )
    assert status == 200, reply
    await hub.apply(
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": "audio"},
            "spec": {
                "namespaces": ["audio"],
                "groups": ["audio-researchers"],
                "fairSharingWeight": "30",
            },
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "audio", "namespace": "audio"},
            "spec": {"clusterQueue": "team-vision"},
        },
    )


async def submit_as(hub: HubUnderTest, token: str, namespace: str, name: str) -> str:
    body = job(name, queue=namespace)
    body["metadata"]["namespace"] = namespace
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/{namespace}/submissions", token=token, body=body
    )
    assert status == 201, wl
    return f"{namespace}/{wl['metadata']['name']}"


async def test_the_tenant_below_its_share_goes_first_and_tenants_show_their_share(
    tmp_path: Path,
) -> None:
    async with running_hub(
        tmp_path, fair_share_calc_period_seconds=0.1, fair_share_half_life_seconds=3600
    ) as hub:
        east, west = await two_clusters(hub, east_cpu="8", west_cpu="0")
        await weigh_tenants_70_30(hub)

        # Earlier use: alice (vision, 70) runs three 2-CPU jobs for a while, bob (audio, 30)
        # one, briefly.
        used = [await submit_as(hub, ALICE, "vision", f"earlier-{i}") for i in range(3)]
        used.append(await submit_as(hub, BOB, "audio", "earlier-bob"))
        for _ in used:
            offer = await east.expect(DispatchOffer)
            key = offer.workload.key()
            admission = Admission(cluster_queue="team-vision")
            await east.send(report(key, 1, WorkloadPhase.ADMITTED, admission=admission))
        await east.send(report(used[-1], 1, WorkloadPhase.SUCCEEDED))
        await asyncio.sleep(1.0)
        for key in used[:-1]:
            await east.send(report(key, 1, WorkloadPhase.SUCCEEDED))

        async def audio_usage_below_vision() -> dict[str, Any] | None:
            _, vision = await hub.call("GET", f"{API}/tenants/vision")
            _, audio = await hub.call("GET", f"{API}/tenants/audio")
            shares = [t.get("status", {}).get("fairShare") for t in (vision, audio)]
            if not all(shares) or shares[0]["rawUsage"] < 10 * shares[1].get("rawUsage", 0):
                return None
            return {"vision": shares[0], "audio": shares[1]}

        shares = await eventually(audio_usage_below_vision)
        assert shares["vision"]["normShares"] == 0.7
        assert shares["audio"]["normShares"] == 0.3
        assert [u["name"] for u in shares["vision"]["users"]] == ["alice"]
        assert shares["audio"]["users"][0]["factor"] > shares["vision"]["users"][0]["factor"]

        # Contention: no room anywhere; alice queues first, bob after her.
        await east.send(capacity("east", "0"))
        await asyncio.sleep(0.3)
        first = await submit_as(hub, ALICE, "vision", "heavy-user")
        # Creation times have a resolution of one second: alice's is strictly older.
        await asyncio.sleep(1.1)
        second = await submit_as(hub, BOB, "audio", "light-user")
        await asyncio.sleep(0.3)
        # Room for one 2-CPU job frees: the light tenant's goes first.
        await east.send(capacity("east", "2"))
        offer = await east.expect(DispatchOffer)
        assert offer.workload.key() == second
        await east.send(
            report(
                second, 1, WorkloadPhase.ADMITTED, admission=Admission(cluster_queue="team-vision")
            )
        )
        await east.send(capacity("east", "4"))
        offer = await east.expect(DispatchOffer)
        assert offer.workload.key() == first

        # The usage is in the store, for the next term or the next hub.
        stored = await hub.hub.state.store.get(USAGE_KEY)
        users = {(row["tenant"], row["user"]) for row in stored.value["usage"]}
        assert {("vision", "alice"), ("audio", "bob")} <= users
        await east.close()
        await west.close()


async def test_a_workload_carries_the_user_who_submitted_it_whatever_the_client_wrote(
    tmp_path: Path,
) -> None:
    async with running_hub(tmp_path) as hub:
        await hub.apply(*fleet_objects())
        body = job("forged")
        body["metadata"]["annotations"] = {"multiq.dev/submitted-by": "admin"}
        status, wl = await hub.call(
            "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=body
        )
        assert status == 201, wl
        assert wl["metadata"]["annotations"]["multiq.dev/submitted-by"] == "alice"


def capacity_of_both_queues(cluster: str, free_cpu: str) -> CapacityReport:
    """`capacity`, for team-vision and team-vision-b alike."""
    report = capacity(cluster, free_cpu)
    report.queues += [
        q.model_copy(update={"cluster_queue": "team-vision-b"}) for q in report.queues
    ]
    return report


async def two_global_queues_3_to_1(hub: HubUnderTest) -> None:
    """Tenant vision's work goes through GlobalQueue `big` (weight 3: its local queue `vision`,
    cluster queue team-vision) or `small` (weight 1: local queue `vision-b`, team-vision-b)."""
    cluster_queue = next(o for o in fleet_objects() if o["kind"] == "ClusterQueue")
    await hub.apply(
        {**cluster_queue, "metadata": {"name": "team-vision-b"}},
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "vision-b", "namespace": "vision"},
            "spec": {"clusterQueue": "team-vision-b"},
        },
        {
            "apiVersion": "multiq.dev/v1alpha1",
            "kind": "ClusterSet",
            "metadata": {"name": "all"},
            "spec": {"clusters": ["east", "west"]},
        },
        *[
            {
                "apiVersion": "multiq.dev/v1alpha1",
                "kind": "GlobalQueue",
                "metadata": {"name": name},
                "spec": {
                    "clusterSet": "all",
                    "clusterQueues": [cluster_queue_name],
                    "fairSharingWeight": weight,
                },
            }
            for name, cluster_queue_name, weight in (
                ("big", "team-vision", "3"),
                ("small", "team-vision-b", "1"),
            )
        ],
    )


async def submit_to(hub: HubUnderTest, local_queue: str, name: str) -> str:
    status, wl = await hub.call(
        "POST",
        f"{API}/namespaces/vision/submissions",
        token=ALICE,
        body=job(name, queue=local_queue),
    )
    assert status == 201, wl
    return f"vision/{wl['metadata']['name']}"


async def test_within_a_tenant_the_queue_below_its_weighted_share_goes_first(
    tmp_path: Path,
) -> None:
    async with running_hub(
        tmp_path, fair_share_calc_period_seconds=0.1, fair_share_half_life_seconds=3600
    ) as hub:
        east, west = await two_clusters(hub, east_cpu="8", west_cpu="0")
        await two_global_queues_3_to_1(hub)
        await east.send(capacity_of_both_queues("east", "8"))
        await west.send(capacity_of_both_queues("west", "0"))

        # Earlier use, all alice's: two 2-CPU jobs through `big`, one through `small`, for the
        # same time. big used twice what small did, but has three times its shares.
        used = [await submit_to(hub, "vision", f"big-{i}") for i in range(2)]
        used.append(await submit_to(hub, "vision-b", "small-0"))
        for _ in used:
            offer = await east.expect(DispatchOffer)
            key = offer.workload.key()
            queue = "team-vision-b" if "small" in key else "team-vision"
            await east.send(
                report(key, 1, WorkloadPhase.ADMITTED, admission=Admission(cluster_queue=queue))
            )
        await asyncio.sleep(1.0)
        for key in used:
            await east.send(report(key, 1, WorkloadPhase.SUCCEEDED))

        async def both_queues_used() -> dict[str, Any] | None:
            _, vision = await hub.call("GET", f"{API}/tenants/vision")
            share = vision.get("status", {}).get("fairShare") or {}
            queues = {q["name"]: q for q in share.get("queues", [])}
            done = []
            for key in used:
                _, wl = await hub.call("GET", f"{API}/namespaces/vision/workloads/{key[7:]}")
                conditions = (wl.get("status") or {}).get("conditions", [])
                done.append(
                    any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)
                )
            if not all(done) or not {"big", "small"} <= queues.keys():
                return None
            if not 1.5 < queues["big"]["rawUsage"] / max(queues["small"]["rawUsage"], 1e-9) < 2.5:
                return None
            return share

        share = await eventually(both_queues_used)
        big, small = share["queues"]
        assert (big["name"], big["rawShares"], big["normShares"]) == ("big", 3.0, 0.75)
        assert (small["name"], small["rawShares"], small["normShares"]) == ("small", 1.0, 0.25)
        assert big["levelFs"] > 1 > small["levelFs"]
        factors = {(u["queue"], u["name"]): u["factor"] for u in share["users"]}
        assert factors == {("big", "alice"): 1.0, ("small", "alice"): 0.5}

        # Contention: no room; small's work waits first, big's after it.
        await east.send(capacity_of_both_queues("east", "0"))
        await asyncio.sleep(0.3)
        older = await submit_to(hub, "vision-b", "older-via-small")
        await asyncio.sleep(1.1)  # creation times have a resolution of one second
        younger = await submit_to(hub, "vision", "younger-via-big")
        await asyncio.sleep(0.3)
        offered: list[str] = []
        hub.hub.dispatcher.observers.append(lambda plan: offered.extend(o.key for o in plan.offers))
        # Room for both at once: the cycle offers big's work first, though it is younger.
        await east.send(capacity_of_both_queues("east", "2"))
        keys = {(await east.expect(DispatchOffer)).workload.key() for _ in range(2)}
        assert keys == {older, younger}
        assert offered[:2] == [younger, older]
        await east.close()
        await west.close()


async def test_usage_stored_before_queues_were_kept_joins_the_tenants_queue_whole(
    tmp_path: Path,
) -> None:
    main_queue = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "GlobalQueue",
        "metadata": {"name": "main"},
        "spec": {"clusterSet": "all", "fairSharingWeight": "2"},
    }
    cluster_set = {
        "apiVersion": "multiq.dev/v1alpha1",
        "kind": "ClusterSet",
        "metadata": {"name": "all"},
        "spec": {"clusters": ["east", "west"]},
    }

    async def fair_share_of_vision(hub: HubUnderTest) -> dict[str, Any] | None:
        _, vision = await hub.call("GET", f"{API}/tenants/vision")
        share: dict[str, Any] | None = (vision.get("status") or {}).get("fairShare")
        return share

    # A hub as it was: usage rows with a tenant and a user, no queue.
    async with running_hub(
        tmp_path, fair_share_calc_period_seconds=3600, fair_share_half_life_seconds=0
    ) as hub:
        await hub.apply(*fleet_objects(), cluster_set, main_queue)
        store = hub.hub.state.store

        async def first_update_done() -> bool:
            try:
                await store.get(USAGE_KEY)
            except NotFound:
                return False
            return True

        await eventually(first_update_done)  # the next is an hour away
        legacy = {
            "updatedAt": "2026-01-01T00:00:00+00:00",
            "usage": [
                {"tenant": "vision", "user": "alice", "usage": 100.0},
                {"tenant": "vision", "user": "carl", "usage": 50.0},
            ],
        }
        await store.update(USAGE_KEY, legacy, expected=None)

    async with running_hub(
        tmp_path, fair_share_calc_period_seconds=0.1, fair_share_half_life_seconds=0
    ) as hub:

        async def with_usage() -> dict[str, Any] | None:
            share = await fair_share_of_vision(hub)
            return share if share and share.get("rawUsage") == 150 else None

        share = await eventually(with_usage)
        assert [(q["name"], q["rawShares"], q["rawUsage"]) for q in share["queues"]] == [
            ("main", 2.0, 150.0)
        ]
        users = {(u["queue"], u["name"]): u["rawUsage"] for u in share["users"]}
        assert users == {("main", "alice"): 100.0, ("main", "carl"): 50.0}
        stored = await hub.hub.state.store.get(USAGE_KEY)
        rows = {(r["tenant"], r["queue"], r["user"]): r["usage"] for r in stored.value["usage"]}
        assert rows == {("vision", "main", "alice"): 100.0, ("vision", "main", "carl"): 50.0}
