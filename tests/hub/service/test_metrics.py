"""The hub's /metrics, scraped over HTTP from a real hub: an agent's session, a dropped frame,
a rejected offer and refused requests show in its counters, and each hub counts in its own
registry. (A whole workload run, hub and agent together: tests/agent/test_metrics.py.)"""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from api.v1alpha1.messages import DispatchOffer, OfferRejected, RejectReason
from hub.metrics import HubMetrics
from tests.hub.service.conftest import ALICE, HubUnderTest, connect_agent, fleet_objects, job
from tests.hub.service.test_dispatch_flow import capacity

API = "/apis/multiq.dev/v1alpha1"


async def scrape(hub: HubUnderTest) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    async with hub.session.get(f"{hub.url}/metrics") as response:  # no token
        assert response.status == 200
        text = await response.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_rejected_offer_and_an_undecodable_frame_are_counted_by_cluster_and_lane(
    hub: HubUnderTest,
) -> None:
    await hub.apply(*fleet_objects())
    east = await connect_agent(hub, "east")
    await east.send(capacity("east", free_cpu="8"))
    await asyncio.sleep(0.2)
    assert value(await scrape(hub), "multiq_cluster_connected", cluster="east") == 1
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=job("train")
    )
    assert status == 201, wl
    offer = await east.expect(DispatchOffer)
    await east.ws.send_str('{"not": "an envelope"}')
    await east.send(
        OfferRejected(
            workload=f"vision/{wl['metadata']['name']}",
            generation=offer.generation,
            reason=RejectReason.INVALID,
            message="cannot run it here",
        )
    )
    await asyncio.sleep(0.3)
    samples = await scrape(hub)
    assert value(samples, "multiq_offers_total", cluster="east", outcome="bound") == 1
    assert value(samples, "multiq_offers_total", cluster="east", outcome="rejected") == 1
    assert value(samples, "multiq_lane_dropped_frames_total", lane="control", reason="invalid") == 1
    await east.close()


async def test_refused_requests_are_counted_by_route_pattern_and_code_not_by_path(
    hub: HubUnderTest,
) -> None:
    status, _ = await hub.call("GET", f"{API}/namespaces/vision/workloads/nothing-here")
    assert status == 404
    status, _ = await hub.call("GET", f"{API}/namespaces/vision/workloads", token="wrong")
    assert status == 401
    status, _ = await hub.call("GET", "/no/such/route")
    assert status == 404
    samples = await scrape(hub)
    named = f"{API}/namespaces/{{ns}}/{{plural}}/{{name}}"
    assert value(samples, "multiq_http_requests_total", route=named, method="GET", code="404") == 1
    listed = f"{API}/namespaces/{{ns}}/{{plural}}"
    assert value(samples, "multiq_http_requests_total", route=listed, method="GET", code="401") == 1
    assert (
        value(samples, "multiq_http_requests_total", route="unmatched", method="GET", code="404")
        == 1
    )
    assert not any("nothing-here" in dict(labels).get("route", "") for _, labels in samples)


def test_two_hubs_in_one_process_count_in_registries_of_their_own() -> None:
    first, second = HubMetrics(), HubMetrics()
    first.offer_outcome("east", "expired")
    assert (
        first.registry.get_sample_value(
            "multiq_offers_total", {"cluster": "east", "outcome": "expired"}
        )
        == 1
    )
    assert (
        second.registry.get_sample_value(
            "multiq_offers_total", {"cluster": "east", "outcome": "expired"}
        )
        is None
    )
