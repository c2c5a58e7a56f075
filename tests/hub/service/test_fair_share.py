"""The hub orders waiting work across the fleet by fair share: two tenants weighted 70/30,
the heavier of which has used the fleet more than its share, wait for the same room; the light
tenant's work goes first although it was submitted later — as real Slurm 22.05 ordered a light
user before a heavy one in the same setting (slurm.md). Usage is kept in the store and each
Tenant's status shows its share, usage and users' factors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from api.v1alpha1.messages import DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import Admission
from hub.fairshare import USAGE_KEY
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
    for _ in range(10):  # the hub writes the tenant's status meanwhile: a 409, then again
        _, vision = await hub.call("GET", f"{API}/tenants/vision")
        vision["spec"]["fairSharingWeight"] = "70"
        status, reply = await hub.call("PUT", f"{API}/tenants/vision", body=vision)
        if status != 409:
            break
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
