"""The agent's Prometheus metrics, under Kueue's names (the agent runs Kueue's admission, so
Kueue's dashboards and alerts read its clusters unchanged), and `multiq_agent_*` for what is
the agent's own (its session, its lease, its log traffic). Served on `--metrics-port`.

Two kinds, as on the hub:
- counted as it happens, by one hook each in the admission shell: a record's phase changing
  (`record_changed`: quota reserved, admitted, evicted, finished — with the waits) and a
  cycle's result (`cycle_done`: attempts, preemptions);
- read at scrape time from what the agent keeps anyway (`StateCollector`): the engine
  snapshot (quotas, usage, reservations, pending workloads per cluster queue and local
  queue), the last cycle's pending reasons (active or inadmissible), the held records, the
  session and the lease. A scrape walks the held workloads once: O(workloads), never more.

Kueue's label names: cluster_queue, status, reason, preempting_cluster_queue, flavor,
resource, priority_class; local queues by name and namespace. Quantities are in Kueue's
units: cores for cpu, bytes for memory, a count for pods (the engine's milli-units / 1000).

Called by: agent.app (builds one `AgentMetrics`, starts `serve_metrics`), agent.admission
(the two hooks).
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.engine.result import CycleResult, Unblock
from agent.engine.snapshot import ClusterQueueName, LocalQueueKey, Snapshot, StopPolicy
from agent.records import Record
from api.v1alpha1.messages import LogData, WorkloadPhase
from telemetry.metrics import Children

__all__ = ["AgentMetrics", "AgentView", "MetricsServer", "serve_metrics"]

log = logging.getLogger(__name__)

# Kueue's buckets for its wait-time histograms (seconds), with finer ones below a second:
# an agent admits an offer in milliseconds when quota is free.
WAIT_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1800.0, 3600.0, 10800.0,
)  # fmt: skip
CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# A pending workload whose last cycle said it waits for nothing but the next cycle (or not
# looked at yet) is `active`; one waiting for an event (quota released, a config change, a
# backoff to pass) is `inadmissible` — Kueue's two heaps.
_ACTIVE_UNBLOCKS = frozenset({Unblock.NEXT_CYCLE})
_HOLDING_QUOTA = frozenset({WorkloadPhase.RESERVED, WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING})
_ADMITTED = frozenset({WorkloadPhase.ADMITTED, WorkloadPhase.RUNNING})
_CQ_STATUSES = ("pending", "active", "terminating")


def _cluster_queue(record: Record) -> str:
    status = record.workload.status
    return status.admission.cluster_queue if status and status.admission else ""


def _priority_class(record: Record) -> str:
    return record.workload.spec.priority_class_name or ""


def _amount(milli: int) -> float:
    """Kueue's unit of a quantity the engine keeps in milli-units."""
    return milli / 1000


class AgentMetrics:
    """Every instrument of one agent, in its own registry (`registry`)."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        self._child = Children()
        by_queue = ["cluster_queue", "priority_class"]
        self.quota_reserved = Counter(
            "kueue_quota_reserved_workloads",
            "Workloads that got quota reserved (a reservation for the hub, or an admission).",
            by_queue,
            registry=registry,
        )
        self.quota_reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "From the offer reaching this cluster until its quota was reserved.",
            by_queue,
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.admitted = Counter(
            "kueue_admitted_workloads",
            "Workloads admitted here (quota reserved and bound by the hub).",
            by_queue,
            registry=registry,
        )
        self.admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "From the offer reaching this cluster until it was admitted here.",
            by_queue,
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.evicted = Counter(
            "kueue_evicted_workloads",
            "Workloads holding quota that were evicted, by reason (Preempted, "
            "PodsReadyTimeout, ClusterLost, …).",
            ["cluster_queue", "reason"],
            registry=registry,
        )
        self.preempted = Counter(
            "kueue_preempted_workloads",
            "Workloads preempted, by the cluster queue of the preemptor and the reason.",
            ["preempting_cluster_queue", "reason"],
            registry=registry,
        )
        self.finished = Counter(
            "kueue_finished_workloads",
            "Workloads admitted here that finished, by result (Succeeded or Failed).",
            ["cluster_queue", "result"],
            registry=registry,
        )
        self.attempts = Counter(
            "kueue_admission_attempts",
            "Admission cycles: `success` when one admitted anything, else `inadmissible`.",
            ["result"],
            registry=registry,
        )
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "How long an admission cycle took, by result.",
            ["result"],
            buckets=CYCLE_BUCKETS,
            registry=registry,
        )
        self.log_bytes = Counter(
            "multiq_agent_log_bytes",
            "Bytes of log lines sent to the hub.",
            registry=registry,
        )
        self.log_lines_dropped = Counter(
            "multiq_agent_log_lines_dropped",
            "Log lines dropped before sending because the hub fell behind.",
            registry=registry,
        )

    # --- hooks --------------------------------------------------------------------------

    def record_changed(self, old: Record | None, new: Record | None, now: float) -> None:
        """A held workload's record changes (agent.admission `_set`): count what its phase
        moving means. A restored or newly offered generation changes nothing here."""
        if old is None or new is None or old.generation != new.generation:
            return
        before, after = old.phase, new.phase
        if before is after:
            return
        queue, priority = _cluster_queue(new) or _cluster_queue(old), _priority_class(new)
        waited = max(0.0, now - new.offered_at)
        if before is WorkloadPhase.PENDING and after in (
            WorkloadPhase.RESERVED,
            WorkloadPhase.ADMITTED,
        ):
            self._child(self.quota_reserved, queue, priority).inc()
            self._child(self.quota_reserved_wait, queue, priority).observe(waited)
        if after is WorkloadPhase.ADMITTED and before in (
            WorkloadPhase.PENDING,
            WorkloadPhase.RESERVED,
        ):
            self._child(self.admitted, queue, priority).inc()
            self._child(self.admission_wait, queue, priority).observe(waited)
        elif after is WorkloadPhase.EVICTED and before in _HOLDING_QUOTA:
            report = new.last_report
            reason = (report.pending_reason if report else None) or "Evicted"
            self._child(self.evicted, queue, reason).inc()
        elif new.finished and before in _ADMITTED:
            self._child(self.finished, queue, after.value).inc()

    def cycle_done(self, snapshot: Snapshot, result: CycleResult, seconds: float) -> None:
        """An admission cycle ran over `snapshot` (agent.admission `cycle`)."""
        outcome = "success" if result.admitted else "inadmissible"
        self._child(self.attempts, outcome).inc()
        self._child(self.attempt_duration, outcome).observe(seconds)
        for preemption in result.preempted:
            preemptor = snapshot.workloads.get(preemption.preemptor)
            lq = snapshot.local_queues.get(preemptor.local_queue) if preemptor else None
            queue = lq.cluster_queue if lq is not None else ""
            self._child(self.preempted, queue, preemption.reason.value).inc()

    def counting_sender(
        self, send: Callable[[LogData], Awaitable[None]]
    ) -> Callable[[LogData], Awaitable[None]]:
        """`send`, counting the bytes and dropped lines of every log frame it sends."""

        async def counted(data: LogData) -> None:
            await send(data)
            self.log_bytes.inc(sum(len(line.text.encode()) for line in data.lines))
            if data.dropped:
                self.log_lines_dropped.inc(data.dropped)

        return counted

    def watch(self, view: AgentView) -> None:
        """Export the gauges read off `view` at every scrape."""
        self.registry.register(StateCollector(view))


@dataclass(frozen=True, slots=True)
class AgentView:
    """What a scrape reads, as callables into the running agent."""

    snapshot: Callable[[], Snapshot]
    records: Callable[[], Mapping[str, Record]]
    last_result: Callable[[], CycleResult | None]
    connected: Callable[[], bool]
    lease_held: Callable[[], bool]
    cycles: Callable[[], int]
    deadline_writes: Callable[[], int]
    fair_usage: Callable[[Snapshot], Mapping[LocalQueueKey, float]] = lambda _: {}
    """Admission fair sharing: each tracked local queue's usage score in the snapshot."""


class StateCollector(Collector):
    """The gauges read off the agent at scrape time (see the module docstring)."""

    def __init__(self, view: AgentView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        view = self.view
        snapshot = view.snapshot()
        records = view.records()
        yield from self._quotas(snapshot)
        yield from self._workloads(snapshot, records, view.last_result())
        yield _gauge(
            "kueue_local_queue_admission_fair_sharing_usage",
            "Admission fair sharing: a local queue's decayed, weighted usage (its score).",
            ["name", "namespace"],
            {
                tuple(reversed(key.split("/", 1))): score
                for key, score in view.fair_usage(snapshot).items()
            },
        )
        connected = GaugeMetricFamily(
            "multiq_agent_connected", "1 while the agent holds a session with the hub."
        )
        connected.add_metric([], 1.0 if view.connected() else 0.0)
        lease = GaugeMetricFamily(
            "multiq_agent_lease_held", "1 while the agent holds its lease from the hub."
        )
        lease.add_metric([], 1.0 if view.lease_held() else 0.0)
        phases = Tally(record.phase.value for record in records.values())
        held = GaugeMetricFamily(
            "multiq_agent_held_workloads", "Workloads the agent holds, by phase.", labels=["phase"]
        )
        for phase in WorkloadPhase:
            held.add_metric([phase.value], float(phases[phase.value]))
        cycles = CounterMetricFamily("multiq_agent_admission_cycles", "Admission cycles run.")
        cycles.add_metric([], float(view.cycles()))
        writes = CounterMetricFamily(
            "multiq_agent_job_deadline_writes",
            "Job deadline PATCHes sent while holding the lease (what fencing costs).",
        )
        writes.add_metric([], float(view.deadline_writes()))
        yield from (connected, lease, held, cycles, writes)

    def _quotas(self, snapshot: Snapshot) -> Iterator[Metric]:
        cell = ["cluster_queue", "flavor", "resource"]
        nominal = GaugeMetricFamily(
            "kueue_cluster_queue_nominal_quota", "Nominal quota of a cluster queue.", labels=cell
        )
        borrowing = GaugeMetricFamily(
            "kueue_cluster_queue_borrowing_limit", "Borrowing limit (when set).", labels=cell
        )
        lending = GaugeMetricFamily(
            "kueue_cluster_queue_lending_limit", "Lending limit (when set).", labels=cell
        )
        status = GaugeMetricFamily(
            "kueue_cluster_queue_status",
            "1 for the cluster queue's status (pending, active, terminating), else 0.",
            labels=["cluster_queue", "status"],
        )
        for name in sorted(snapshot.cluster_queues):
            cq = snapshot.cluster_queues[name]
            flavors_known = True
            for group in cq.resource_groups:
                for quotas in group.flavors:
                    flavors_known &= quotas.flavor in snapshot.flavors
                    for resource in sorted(quotas.resources):
                        quota = quotas.resources[resource]
                        labels = [name, quotas.flavor, resource]
                        nominal.add_metric(labels, _amount(quota.nominal))
                        if quota.borrowing_limit is not None:
                            borrowing.add_metric(labels, _amount(quota.borrowing_limit))
                        if quota.lending_limit is not None:
                            lending.add_metric(labels, _amount(quota.lending_limit))
            current = "active" if flavors_known and cq.stop_policy is StopPolicy.NONE else "pending"
            for one in _CQ_STATUSES:
                status.add_metric([name, one], 1.0 if one == current else 0.0)
        yield from (nominal, borrowing, lending, status)

    def _workloads(
        self, snapshot: Snapshot, records: Mapping[str, Record], result: CycleResult | None
    ) -> Iterator[Metric]:
        """One pass over the snapshot's workloads: the pending ones by queue and status, the
        quota held by reservations (and by admissions, for usage)."""
        pending: Tally[tuple[str, str]] = Tally()
        lq_pending: Tally[tuple[str, str]] = Tally()
        reserving: Tally[str] = Tally()
        admitted: Tally[str] = Tally()
        lq_admitted: Tally[str] = Tally()
        reservation: Tally[tuple[str, str, str]] = Tally()
        usage: Tally[tuple[str, str, str]] = Tally()
        reasons = result.pending if result is not None else {}
        for name, cq in snapshot.cluster_queues.items():
            for group in cq.resource_groups:
                for quotas in group.flavors:
                    for resource in quotas.resources:
                        reservation[name, quotas.flavor, resource] += 0  # shown at 0, not absent
                        usage[name, quotas.flavor, resource] += 0
        for workload in snapshot.workloads.values():
            if workload.admission is None:
                lq = snapshot.local_queues.get(workload.local_queue)
                if lq is None:
                    continue  # routed nowhere: in no cluster queue's count
                reason = reasons.get(workload.id)
                active = reason is None or reason.unblock in _ACTIVE_UNBLOCKS
                state = "active" if active else "inadmissible"
                pending[lq.cluster_queue, state] += 1
                lq_pending[workload.local_queue, state] += 1
                continue
            queue: ClusterQueueName = workload.admission.cluster_queue
            record = records.get(workload.id)
            running = record is not None and record.phase in _ADMITTED
            reserving[queue] += 1
            if running:
                admitted[queue] += 1
                lq_admitted[workload.local_queue] += 1
            for (flavor, resource), amount in workload.admission.total.items():
                reservation[queue, flavor, resource] += amount
                if running:
                    usage[queue, flavor, resource] += amount
        yield _gauge(
            "kueue_pending_workloads",
            "Workloads waiting in a cluster queue: `active` (to be tried) or `inadmissible`.",
            ["cluster_queue", "status"],
            {
                (name, state): pending[name, state]
                for name in snapshot.cluster_queues
                for state in ("active", "inadmissible")
            },
        )
        yield _gauge(
            "kueue_reserving_active_workloads",
            "Workloads holding quota reserved in a cluster queue (admitted or not).",
            ["cluster_queue"],
            {(name,): reserving[name] for name in snapshot.cluster_queues},
        )
        yield _gauge(
            "kueue_admitted_active_workloads",
            "Workloads admitted in a cluster queue and not finished.",
            ["cluster_queue"],
            {(name,): admitted[name] for name in snapshot.cluster_queues},
        )
        yield _gauge(
            "kueue_cluster_queue_resource_reservation",
            "Quota reserved in a cluster queue, per flavor and resource.",
            ["cluster_queue", "flavor", "resource"],
            {key: _amount(amount) for key, amount in reservation.items()},
        )
        yield _gauge(
            "kueue_cluster_queue_resource_usage",
            "Quota used by admitted workloads of a cluster queue, per flavor and resource.",
            ["cluster_queue", "flavor", "resource"],
            {key: _amount(amount) for key, amount in usage.items()},
        )
        local_queues = sorted(snapshot.local_queues.items())
        yield _gauge(
            "kueue_local_queue_pending_workloads",
            "Workloads waiting in a local queue: `active` or `inadmissible`.",
            ["name", "namespace", "status"],
            {
                (lq.name, lq.namespace, state): lq_pending[key, state]
                for key, lq in local_queues
                for state in ("active", "inadmissible")
            },
        )
        yield _gauge(
            "kueue_local_queue_admitted_active_workloads",
            "Workloads admitted through a local queue and not finished.",
            ["name", "namespace"],
            {(lq.name, lq.namespace): lq_admitted[key] for key, lq in local_queues},
        )


def _gauge(
    name: str, help_text: str, labels: list[str], values: Mapping[tuple[str, ...], float]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=labels)
    for key in sorted(values):
        family.add_metric(list(key), float(values[key]))
    return family


class MetricsServer:
    """The agent's `/metrics` endpoint: a small aiohttp server of its own (the agent serves
    nothing else over HTTP)."""

    def __init__(self, runner: web.AppRunner, url: str) -> None:
        self.runner = runner
        self.url = url

    async def close(self) -> None:
        await self.runner.cleanup()


async def serve_metrics(metrics: AgentMetrics, host: str, port: int) -> MetricsServer:
    """Serve `metrics` on http://host:port/metrics (port 0: any free port; see `.url`)."""
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(metrics.registry))

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    url = f"http://{host}:{bound[1]}"
    log.info("metrics served on %s/metrics", url)
    return MetricsServer(runner, url)
