"""A hub and its agents may be upgraded in any order (docs/protocol.md): an offer from a newer
hub, carrying fields this agent does not know, is taken with those fields ignored, and the
agent says once which; before, the agent dropped the whole message and never ran the work."""

from __future__ import annotations

import json
import logging

import pytest

from api.v1alpha1.messages import CapacityReport, Envelope, Hello, WorkloadPhase
from tests.agent.conftest import AgentRunner, FakeHub, job_source, offer_for, status


async def test_a_newer_hubs_offer_with_fields_unknown_here_is_admitted_and_named_once(
    agents: AgentRunner, hub: FakeHub, caplog: pytest.LogCaptureFixture
) -> None:
    await agents.start()
    await hub.wait_for(lambda p: isinstance(p, Hello))
    await hub.wait_for(lambda p: isinstance(p, CapacityReport))
    offer = offer_for(job_source("skew", script="true"))
    lane = hub.control
    assert lane is not None
    lane.seq += 1
    wire = json.loads(Envelope.wrap(offer, seq=lane.seq).to_json())
    wire["payload"]["placementHints"] = {"rack": "r1"}  # a field of some later version
    with caplog.at_level(logging.WARNING, logger="agent.hubclient"):
        await lane.ws.send_str(json.dumps(wire))
        admitted = await hub.wait_for(status(WorkloadPhase.ADMITTED, "skew"))
    assert admitted.generation == 1
    warnings = [r.getMessage() for r in caplog.records if "does not know" in r.getMessage()]
    assert warnings == [
        "control lane: the hub sends fields this agent does not know (a newer hub: upgrade "
        "the agent to use them); ignored: payload.placementHints"
    ]
