"""Fair sharing at the hub: a MemberCluster's `spec.fairSharing` reaches that cluster's agent
(and no other) in its ConfigSync, and a ClusterQueue's status shows the weighted share its
clusters' agents report (`qctl get cq -o wide`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from api.v1alpha1.messages import CapacityReport, ConfigSync, WeightedShare
from qctl import render
from tests.hub.service.conftest import HubUnderTest, connect_agent, fleet_objects
from tests.hub.service.test_admission_fair_sharing import eventually

API = "/apis/multiq.dev/v1alpha1"


async def test_a_member_clusters_fair_sharing_reaches_only_its_agent(hub: HubUnderTest) -> None:
    docs = fleet_objects()
    for doc in docs:
        if doc["kind"] == "MemberCluster" and doc["metadata"]["name"] == "east":
            doc["spec"]["fairSharing"] = {"preemptionStrategies": ["LessThanInitialShare"]}
    await hub.apply(*docs)
    east, west = await connect_agent(hub, "east"), await connect_agent(hub, "west")
    east_sync, west_sync = await east.expect(ConfigSync), await west.expect(ConfigSync)
    assert east_sync.fair_sharing is not None
    assert east_sync.fair_sharing.preemption_strategies == ["LessThanInitialShare"]
    assert west_sync.fair_sharing is None
    await east.close()
    await west.close()


async def test_multiq_toward_fair_share_is_accepted_and_reaches_the_agent(
    hub: HubUnderTest,
) -> None:
    docs = fleet_objects()
    for doc in docs:
        if doc["kind"] == "MemberCluster" and doc["metadata"]["name"] == "east":
            doc["spec"]["fairSharing"] = {"preemptionStrategies": ["MultiQTowardFairShare"]}
    await hub.apply(*docs)
    east = await connect_agent(hub, "east")
    sync = await east.expect(ConfigSync)
    assert sync.fair_sharing is not None
    assert sync.fair_sharing.preemption_strategies == ["MultiQTowardFairShare"]
    await east.close()


@pytest.mark.parametrize(
    ("strategies", "said"),
    [
        pytest.param(["Greedy"], "Greedy", id="an unknown strategy"),
        pytest.param(
            ["LessThanOrEqualToFinalShare", "MultiQTowardFairShare"],
            "must be the only strategy",
            id="MultiQ's strategy beside Kueue's",
        ),
    ],
)
async def test_a_member_clusters_bad_fair_sharing_is_refused_naming_the_field(
    hub: HubUnderTest, strategies: list[str], said: str
) -> None:
    member = next(d for d in fleet_objects() if d["kind"] == "MemberCluster")
    member["spec"]["fairSharing"] = {"preemptionStrategies": strategies}
    code, body = await hub.call("POST", f"{API}/memberclusters", body=member)
    assert code == 422, body
    assert "spec.fairSharing.preemptionStrategies" in str(body)
    assert said in str(body)


async def test_a_cluster_queues_weighted_share_is_the_largest_its_clusters_report(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    cq_name = next(d for d in fleet_objects() if d["kind"] == "ClusterQueue")["metadata"]["name"]
    east, west = await connect_agent(hub, "east"), await connect_agent(hub, "west")
    at = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    for agent, cluster, share in ((east, "east", 250), (west, "west", 600)):
        shares = [WeightedShare(kind="ClusterQueue", name=cq_name, weighted_share=share)]
        await agent.send(CapacityReport(cluster=cluster, observed_at=at, weighted_shares=shares))

    async def status() -> dict[str, Any] | None:
        _, body = await hub.call("GET", f"{API}/clusterqueues/{cq_name}")
        fair = (body.get("status") or {}).get("fairSharing") or {}
        return body if fair.get("weightedShare") == 600 else None

    body = await eventually(status)
    columns = render.columns_for("ClusterQueue", namespaced=False, all_namespaces=False, wide=True)
    table = render.render_table([body], columns)
    assert "WEIGHTED-SHARE" in table and "600" in table
    await east.close()
    await west.close()
