"""A hub and its agents may be upgraded in any order (docs/protocol.md): a message from a newer
agent, carrying fields this hub does not know, is taken with those fields ignored, and the
hub says once which fields it ignored; before, the whole message was dropped, so a newer
agent's capacity and workload reports never reached an older hub."""

from __future__ import annotations

import json
import logging

import pytest

from api.v1alpha1.messages import CapacityReport, ConfigSync, Envelope
from tests.hub.service.conftest import HubUnderTest, connect_agent, fleet_objects
from tests.hub.service.test_dispatch_flow import capacity, eventually


async def test_a_newer_agents_report_with_fields_unknown_here_is_taken_and_named_once(
    hub: HubUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    await hub.apply(*fleet_objects())
    agent = await connect_agent(hub, "east")
    await agent.expect(ConfigSync)
    wire = json.loads(Envelope.wrap(capacity("east", "5"), seq=1).to_json())
    wire["payload"]["gpuHealth"] = {"degraded": 0}  # a field of some later version
    wire["payload"]["queues"][0]["burstable"] = "2"
    with caplog.at_level(logging.WARNING, logger="hub.lanes"):
        for _ in range(2):
            agent.seq += 1
            wire["seq"] = agent.seq
            await agent.ws.send_str(json.dumps(wire))

        async def reported() -> CapacityReport | None:
            return hub.hub.fleet.clusters["east"].capacity

        taken = await eventually(reported)
    assert [(q.resource, str(q.headroom)) for q in taken.queues] == [
        ("cpu", "5"),
        ("memory", "32Gi"),
    ]
    warnings = [r.getMessage() for r in caplog.records if "does not know" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith("ignored: payload.gpuHealth, payload.queues[0].burstable")
    await agent.close()
