"""Prometheus metrics, scraped for real: a real hub (aiohttp on a loopback port, SQLite) and a
real agent on kubesim run a workload; `/metrics` of both is read over HTTP and parsed with
prometheus_client's parser, and the counters moved as they should. The Grafana dashboard asks
only for metrics that such a scrape exports."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.app import Agent
from agent.k8s.client import KubeClient
from agent.settings import AgentSettings
from tests.agent.conftest import eventually, fast_timings
from tests.hub.service.conftest import (
    AGENT_TOKENS,
    ALICE,
    HubUnderTest,
    fleet_objects,
    job,
    running_hub,
)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "manifests" / "grafana" / "multiq.json"
API = "/apis/multiq.dev/v1alpha1"
CLUSTER = "east"
PROMETHEUS_TEXT = "text/plain; version=1.0.0; charset=utf-8"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Scrape:
    """One parsed exposition: every sample by (name, sorted labels), and every name a query
    may use (a counter's `_total`, a histogram's `_bucket`, even with no sample yet)."""

    samples: Samples
    names: set[str]
    content_type: str

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= set(ls))


SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}


async def scrape(session: aiohttp.ClientSession, url: str) -> Scrape:
    async with session.get(f"{url}/metrics") as response:
        assert response.status == 200, await response.text()
        text = await response.text()
        content_type = response.headers["Content-Type"]
    samples: Samples = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        for sample in family.samples:
            names.add(sample.name)
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return Scrape(samples, names, content_type)


@dataclass
class Federation:
    hub: HubUnderTest
    agent: Agent

    @property
    def agent_url(self) -> str:
        assert self.agent.metrics_server is not None
        return self.agent.metrics_server.url


@pytest.fixture
async def federation(kube: KubeClient, tmp_path: Path) -> AsyncIterator[Federation]:
    async with running_hub(tmp_path) as hub:
        await hub.apply(*fleet_objects())
        agent = Agent(
            AgentSettings(
                cluster=CLUSTER,
                hub=hub.url,
                token=AGENT_TOKENS[CLUSTER],
                state_dir=tmp_path / "agent-state",
                timings=fast_timings(),
                metrics_port=0,
                metrics_address="127.0.0.1",
            ),
            kube,
        )
        task = asyncio.create_task(agent.run())
        try:
            await eventually(lambda: agent.ready.is_set() or task.done())
            if task.done():
                task.result()
            # Connected on both ends, as the scrapes expect.
            await eventually(lambda: hub.hub.fleet.clusters[CLUSTER].connected)
            await eventually(agent.session.connected.is_set)
            yield Federation(hub, agent)
        finally:
            task.cancel()
            await asyncio.wait([task], timeout=10)


async def submit(fed: Federation, script: str = "echo hi") -> str:
    """Submit a Job of two pods of one CPU each through the hub."""
    hub = fed.hub
    await eventually(lambda: hub.hub.fleet.clusters[CLUSTER].connected)
    body = job("train")
    body["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", script]
    status, wl = await hub.call(
        "POST", f"{API}/namespaces/vision/submissions", token=ALICE, body=body
    )
    assert status == 201, wl
    return str(wl["metadata"]["name"])


async def run_one_workload(fed: Federation, script: str = "echo hi") -> str:
    """Submit a Job through the hub and wait until it finished on the member cluster."""
    return await finish(fed, await submit(fed, script))


async def finish(fed: Federation, name: str) -> str:
    hub = fed.hub

    async def finished() -> bool:
        status, body = await hub.call("GET", f"{API}/namespaces/vision/workloads/{name}")
        assert status == 200, body
        conditions = (body.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)

    await eventually(finished, within=30)
    return name


async def test_a_workload_run_on_a_member_cluster_moves_the_hubs_and_the_agents_counters(
    federation: Federation,
) -> None:
    session = federation.hub.session
    hub_before = await scrape(session, federation.hub.url)
    agent_before = await scrape(session, federation.agent_url)
    assert hub_before.value("multiq_connected_clusters") == 1
    assert hub_before.value("multiq_cluster_connected", cluster=CLUSTER) == 1
    assert hub_before.value("multiq_cluster_connected", cluster="west") == 0
    assert hub_before.value("multiq_leader") == 1
    assert agent_before.value("multiq_agent_connected") == 1
    assert agent_before.value("kueue_admitted_workloads_total") == 0

    name = await submit(federation, "sleep 1.5")

    async def running() -> Scrape | None:
        one = await scrape(session, federation.agent_url)
        return one if one.value("kueue_admitted_active_workloads", **queue) == 1 else None

    queue = {"cluster_queue": "team-vision"}
    cpu = {"cluster_queue": "team-vision", "flavor": "default", "resource": "cpu"}
    while_running = await eventually(running, within=20)
    assert while_running.value("kueue_cluster_queue_resource_usage", **cpu) == 2  # 2 pods × 1
    assert while_running.value("kueue_cluster_queue_resource_reservation", **cpu) == 2
    assert while_running.value("kueue_reserving_active_workloads", **queue) == 1
    assert (
        while_running.value("multiq_agent_held_workloads", phase="Running")
        + (while_running.value("multiq_agent_held_workloads", phase="Admitted"))
        == 1
    )
    hub_running = await scrape(session, federation.hub.url)
    assert hub_running.value("multiq_cluster_workloads", cluster=CLUSTER) == 1

    await finish(federation, name)
    hub_after = await scrape(session, federation.hub.url)
    agent_after = await scrape(session, federation.agent_url)

    # The hub: one BestFit offer, bound, to the one connected cluster; the bind observed once.
    assert hub_after.value("multiq_offers_total", cluster=CLUSTER, outcome="bound") == 1
    assert hub_after.total("multiq_offers_total", outcome="expired") == 0
    assert hub_after.total("multiq_offers_total", outcome="rejected") == 0
    assert hub_after.value("multiq_dispatch_latency_seconds_count") == 1
    assert hub_after.value("multiq_admission_latency_seconds_count") == 1
    assert hub_after.value("multiq_workloads", phase="Succeeded") == 1
    assert hub_after.value("multiq_workloads", phase="Pending") == 0
    assert hub_after.value("multiq_pending_workloads") == 0
    assert hub_after.total("multiq_agent_reports_total", cluster=CLUSTER, result="accepted") >= 2
    assert hub_after.value("multiq_store_write_duration_seconds_count", op="update") > 0
    assert hub_after.value("multiq_store_write_duration_seconds_count", op="create") > 0
    submissions = {
        "route": "/apis/multiq.dev/v1alpha1/namespaces/{ns}/submissions",
        "method": "POST",
        "code": "201",
    }
    assert hub_after.value("multiq_http_requests_total", **submissions) == 1
    assert hub_after.value("multiq_cluster_workloads", cluster=CLUSTER) == 0
    assert "multiq_global_queue_workloads" in hub_after.names  # (no global queue here)

    # The agent: Kueue's counters for one admission in cluster queue team-vision.
    cq = {"cluster_queue": "team-vision", "priority_class": ""}
    assert agent_after.value("kueue_quota_reserved_workloads_total", **cq) == 1
    assert agent_after.value("kueue_admitted_workloads_total", **cq) == 1
    assert agent_after.value("kueue_admission_wait_time_seconds_count", **cq) == 1
    finished = {"cluster_queue": "team-vision", "result": "Succeeded"}
    assert agent_after.value("kueue_finished_workloads_total", **finished) == 1
    assert agent_after.total("kueue_evicted_workloads_total") == 0
    assert agent_after.total("kueue_admission_attempts_total", result="success") == 1
    assert agent_after.value("kueue_cluster_queue_nominal_quota", **cpu) == 8
    # Finished: it holds no quota and waits nowhere any more.
    assert ("kueue_cluster_queue_resource_usage", tuple(sorted(cpu.items()))) in agent_after.samples
    assert agent_after.value("kueue_cluster_queue_resource_usage", **cpu) == 0
    assert agent_after.value("kueue_admitted_active_workloads", cluster_queue="team-vision") == 0
    pending = {"cluster_queue": "team-vision", "status": "active"}
    assert agent_after.value("kueue_pending_workloads", **pending) == 0
    assert (
        agent_after.value(
            "kueue_cluster_queue_status", cluster_queue="team-vision", status="active"
        )
        == 1
    )
    assert agent_after.value("multiq_agent_held_workloads", phase="Succeeded") == 1
    assert agent_after.value("multiq_agent_lease_held") == 1


async def test_metrics_are_served_without_a_token_in_prometheus_text_format(
    federation: Federation,
) -> None:
    async with aiohttp.ClientSession() as anonymous:  # no Authorization header at all
        hub = await scrape(anonymous, federation.hub.url)
        agent = await scrape(anonymous, federation.agent_url)
    assert hub.content_type.startswith("text/plain")
    assert agent.content_type.startswith("text/plain")
    assert "multiq_http_requests_total" in hub.names
    assert "kueue_pending_workloads" in agent.names


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    exprs: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if "expr" in t)
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if isinstance(query, str):
            exprs.append(query)
    return exprs


METRIC_NAME = re.compile(r"\b(?:multiq|kueue)_[a-zA-Z0-9_]+")


async def test_every_metric_the_grafana_dashboard_queries_is_in_a_real_scrape(
    federation: Federation,
) -> None:
    await run_one_workload(federation)
    session = federation.hub.session
    exported = (await scrape(session, federation.hub.url)).names
    exported |= (await scrape(session, federation.agent_url)).names
    dashboard = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(dashboard)
    assert len(queries) >= 15, "the dashboard has a panel for each group of metrics"
    used = {name for query in queries for name in METRIC_NAME.findall(query)}
    assert used, "the dashboard queries MultiQ's metrics"
    assert sorted(used - exported) == []


def test_the_grafana_dashboard_is_a_grafana_10_model_whose_panels_each_query_the_datasource() -> (
    None
):
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36  # Grafana 9.0+ (10.x writes 38-39)
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["gridPos"].keys() >= {"h", "w", "x", "y"}
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], f"panel {panel['title']!r} queries nothing"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert target["expr"].strip()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
