"""Admission fair sharing at the hub: a MemberCluster's `spec.admissionFairSharing` reaches
that cluster's agent (and no other) in its ConfigSync, and each LocalQueue's status shows the
decayed usage its clusters' agents report, summed, with each cluster's part."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from api.quantity import Quantity
from api.v1alpha1.messages import CapacityReport, ConfigSync, LocalQueueUsage
from qctl import render
from tests.hub.service.conftest import HubUnderTest, connect_agent, fleet_objects

API = "/apis/multiq.dev/v1alpha1"


async def eventually(check: Any, within: float = 5.0) -> Any:
    async with asyncio.timeout(within):
        while True:
            result = await check()
            if result:
                return result
            await asyncio.sleep(0.05)


def _with_fair_sharing(docs: list[dict[str, Any]], cluster: str) -> list[dict[str, Any]]:
    for doc in docs:
        if doc["kind"] == "MemberCluster" and doc["metadata"]["name"] == cluster:
            doc["spec"]["admissionFairSharing"] = {
                "usageHalfLifeSeconds": 600,
                "usageSamplingIntervalSeconds": 30,
                "resourceWeights": {"cpu": 2.0},
            }
    return docs


async def test_a_member_clusters_admission_fair_sharing_reaches_only_its_agent(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*_with_fair_sharing(fleet_objects(), "east"))
    east, west = await connect_agent(hub, "east"), await connect_agent(hub, "west")
    east_sync, west_sync = await east.expect(ConfigSync), await west.expect(ConfigSync)
    fair = east_sync.admission_fair_sharing
    assert fair is not None
    assert (fair.usage_half_life_seconds, fair.usage_sampling_interval_seconds) == (600, 30)
    assert fair.resource_weights == {"cpu": 2.0}
    assert west_sync.admission_fair_sharing is None
    await east.close()
    await west.close()


async def test_an_invalid_admission_fair_sharing_is_refused_naming_the_field(
    hub: HubUnderTest,
) -> None:
    member = next(d for d in fleet_objects() if d["kind"] == "MemberCluster")
    member["spec"]["admissionFairSharing"] = {"usageSamplingIntervalSeconds": 0}
    code, body = await hub.call("POST", f"{API}/memberclusters", body=member)
    assert code == 422, body
    assert "spec.admissionFairSharing.usageSamplingIntervalSeconds" in str(body)


def _usage(cluster: str, cpu: str, at: datetime) -> CapacityReport:
    return CapacityReport(
        cluster=cluster,
        observed_at=at,
        local_queues=[
            LocalQueueUsage(
                namespace="vision",
                name="vision",
                consumed_resources={"cpu": Quantity.parse(cpu)},
                last_update=at,
            )
        ],
    )


async def test_a_local_queues_status_shows_its_clusters_usage_summed(hub: HubUnderTest) -> None:
    await hub.apply(*fleet_objects())
    east, west = await connect_agent(hub, "east"), await connect_agent(hub, "west")
    early, late = datetime(2026, 1, 1, 12, 0, tzinfo=UTC), datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    await east.send(_usage("east", "1500m", early))
    await west.send(_usage("west", "2", late))

    async def status() -> dict[str, Any] | None:
        _, body = await hub.call("GET", f"{API}/namespaces/vision/localqueues/vision")
        fair = (body.get("status") or {}).get("fairSharing") or {}
        afs = fair.get("admissionFairSharingStatus") or {}
        return body if len(afs.get("clusters", [])) == 2 else None

    body = await eventually(status)
    afs = body["status"]["fairSharing"]["admissionFairSharingStatus"]
    assert afs["consumedResources"] == {"cpu": "3500m"}
    assert afs["lastUpdate"].startswith("2026-01-01T12:05:00")
    assert [(c["cluster"], c["consumedResources"]) for c in afs["clusters"]] == [
        ("east", {"cpu": "1500m"}),
        ("west", {"cpu": "2"}),
    ]
    columns = render.columns_for("LocalQueue", namespaced=True, all_namespaces=False, wide=True)
    table = render.render_table([body], columns)
    assert "FAIR-USAGE" in table
    assert "cpu=3500m" in table
    await east.close()
    await west.close()
