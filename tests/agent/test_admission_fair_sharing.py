"""Admission fair sharing at the agent: a local queue's usage is sampled while its work runs,
kept in the state directory, and still orders the cluster queue after the agent restarts —
a light queue's workload goes before an older one of the queue that ran; and each tracked
local queue's usage goes to the hub in the capacity report."""

from __future__ import annotations

import json

from prometheus_client import generate_latest

from agent.engine.cycle import schedule
from agent.engine.fair_usage import LocalQueueUsage as FairUsage
from agent.engine.snapshot import ClusterQueueName, LocalQueueKey, ResourceName
from agent.fair_usage import UsageBook
from agent.k8s.client import KubeClient
from agent.records import Record, on_offer
from agent.settings import parse_args
from agent.snapshots import SnapshotCache
from api.v1alpha1.federation import AdmissionFairSharing
from api.v1alpha1.messages import CapacityReport, ConfigSync, WorkloadPhase
from api.v1alpha1.queues import ClusterQueue
from tests.agent.conftest import (
    AgentRunner,
    FakeHub,
    cluster_queue,
    eventually,
    flavor,
    job_source,
    local_queue,
    offer_for,
    status,
)

HEAVY = LocalQueueKey("team-a/heavy")
CPU = ResourceName("cpu")


def _config_cq(cpu: str = "1") -> ClusterQueue:
    wire = cluster_queue(cpu=cpu).to_wire()
    wire["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return ClusterQueue.model_validate(wire)


def _config() -> ConfigSync:
    return ConfigSync(
        revision=1,
        resource_flavors=[flavor()],
        cluster_queues=[_config_cq()],
        local_queues=[local_queue(name) for name in ("heavy", "light", "other")],
        admission_fair_sharing=AdmissionFairSharing(
            usage_half_life_seconds=30, usage_sampling_interval_seconds=1
        ),
    )


async def test_usage_survives_a_restart_and_orders_the_light_queue_first(
    agents: AgentRunner, hub: FakeHub, kube: KubeClient
) -> None:
    hub.config = _config()
    agent = await agents.start_with()
    await hub.offer(offer_for(job_source("ran", script="sleep 2.5", cpu="1", queue="heavy")))
    await hub.wait_for(status(WorkloadPhase.SUCCEEDED, "ran"), within=20)

    def heavy_used() -> bool:
        usage = agent.admission.usage.usage.get(HEAVY)
        return usage is not None and usage.consumed.get(CPU, 0.0) > 0

    await eventually(heavy_used)
    scraped = generate_latest(agent.metrics.registry).decode()
    [line] = [
        s
        for s in scraped.splitlines()
        if s.startswith("kueue_local_queue_admission_fair_sharing_usage") and 'name="heavy"' in s
    ]
    assert 'namespace="team-a"' in line and float(line.split()[-1]) > 0
    reported = await hub.wait_for(
        lambda p: (
            isinstance(p, CapacityReport)
            and any(q.name == "heavy" and q.consumed_resources for q in p.local_queues)
        )
    )
    assert {q.name for q in reported.local_queues} == {"heavy", "light", "other"}
    await agents.stop()

    kept = json.loads((agents.state_dir / "fair_usage.json").read_text())
    assert kept["localQueues"][HEAVY]["consumed"]["cpu"] > 0
    assert not kept["localQueues"]["team-a/light"]["consumed"]

    # After the restart: a workload of the other queue holds the one CPU while an older
    # heavy one and a newer light one wait; when it finishes, the light one goes first.
    agent = await agents.start_with()
    assert agent.admission.usage.usage[HEAVY].consumed
    await hub.offer(offer_for(job_source("hold", script="sleep 2", cpu="1", queue="other")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "hold"))
    await hub.offer(offer_for(job_source("heavy-next", script="sleep 30", cpu="1", queue="heavy")))
    await hub.offer(offer_for(job_source("light-next", script="sleep 30", cpu="1", queue="light")))
    await hub.wait_for(status(WorkloadPhase.ADMITTED, "light-next"), within=20)
    assert not [p for p in hub.payloads if status(WorkloadPhase.ADMITTED, "heavy-next")(p)]


def test_the_agents_flag_turns_it_on_and_the_hubs_setting_wins() -> None:
    required = ["--hub", "http://hub", "--cluster", "c", "--token", "t"]
    half_life, sampling = "--admission-fair-sharing-half-life", "--admission-fair-sharing-sampling"
    settings = parse_args([*required, half_life, "600", sampling, "30"])
    own = settings.admission_fair_sharing
    assert own == AdmissionFairSharing(
        usage_half_life_seconds=600, usage_sampling_interval_seconds=30
    )
    off = parse_args(required)
    assert off.admission_fair_sharing is None

    cache = SnapshotCache(admission_fair_sharing=own)
    agents_own = cache.build(ConfigSync(revision=1), {}).config.admission_fair_sharing
    assert agents_own is not None and agents_own.usage_half_life_seconds == 600.0
    pushed = ConfigSync(
        revision=2, admission_fair_sharing=AdmissionFairSharing(usage_half_life_seconds=60)
    )
    hubs = cache.build(pushed, {}).config.admission_fair_sharing
    assert hubs is not None and hubs.usage_half_life_seconds == 60.0


def test_an_unreadable_usage_file_starts_the_book_empty() -> None:
    book = UsageBook()
    book.load('{"version": 1, "localQueues": {"team-a/heavy": {"consumed": {"cpu": 5.0}}}}')
    assert book.usage == {}
    book.load(None)
    assert book.usage == {}


def _waiting(name: str, queue: str) -> Record:
    record = on_offer(None, offer_for(job_source(name, queue=queue)), 0.0).record
    assert record is not None
    return record


def test_the_cache_restamps_a_queue_whose_score_moved_and_the_carry_resorts_it() -> None:
    cfg = _config().model_copy(update={"cluster_queues": [_config_cq(cpu="0")]})
    cache = SnapshotCache()
    held = {
        "team-a/job-early": _waiting("early", "heavy"),
        "team-a/job-late": _waiting("late", "light"),
    }
    light = LocalQueueKey("team-a/light")
    cache.build(cfg, held, now=0.0)  # both queues start at zero: age decides
    cache.usage.usage[HEAVY] = FairUsage({CPU: 5000.0}, {}, 0.0)
    orders = []
    for now, changed in ((1.0, None), (1.5, [])):
        snap = cache.build(cfg, held, [] if changed is not None else None, now=now)
        result = cache.cycle(snap)(now)
        full = schedule(snap, now)
        order = [w.queue_name for w in result.routed[ClusterQueueName("cq")]]
        assert order == [w.queue_name for w in full.routed[ClusterQueueName("cq")]]
        orders.append(order)
        cache.usage.usage[light] = FairUsage({CPU: 9000.0}, {}, 0.0)  # now the heavier
    assert orders == [["light", "heavy"], ["heavy", "light"]]
