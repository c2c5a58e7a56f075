"""A MemberCluster's `spec.fairSharing` reaches that cluster's agent (and no other) in its
ConfigSync."""

from __future__ import annotations

from api.v1alpha1.messages import ConfigSync
from tests.hub.service.conftest import HubUnderTest, connect_agent, fleet_objects


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
